"""The code scorers, ``python`` and ``command``: run only in Reef's sandbox.

(Interface; the implementation is being written.)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Checked:
    score: float | None  # None: the sandbox could not run the check (an outage)
    feedback: str


def run_python(source: str, answer: str, files: dict[str, str], timeout: float) -> Checked:
    raise NotImplementedError


def run_command(command: str, answer: str, files: dict[str, str], timeout: float) -> Checked:
    raise NotImplementedError

"""Test helper: Reef's sandbox run dirs for one work dir (other sandboxes may run on this
host meanwhile, so tests look at their own only)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from sandbox import _runs


def runs_for(work: Path) -> list[Path]:
    found = []
    for run in _runs.base_dir().glob("run-*"):
        with contextlib.suppress(OSError, ValueError):
            if json.loads((run / "run.json").read_text())["workdir"] == str(work):
                found.append(run)
    return found

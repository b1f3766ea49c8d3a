"""Entry points `reef-pi` and `reef-claude` (the agent wrappers arrive with the adapters)."""

from __future__ import annotations

import sys


def _not_yet(name: str) -> None:
    sys.stderr.write(
        f"{name}: the agent wrapper is not part of this Reef version yet "
        "(fix: use `reef harness …` to manage releases; see README)\n"
    )
    sys.exit(2)


def run_pi() -> None:
    _not_yet("reef-pi")


def run_claude() -> None:
    _not_yet("reef-claude")

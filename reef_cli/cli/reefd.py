"""Entry point `reefd` (the GPU daemon is not part of this Reef version yet)."""

from __future__ import annotations

import sys


def run() -> None:
    sys.stderr.write(
        "reefd: the GPU daemon is not part of this Reef version yet "
        "(fix: use `reef` for harness releases; see README)\n"
    )
    sys.exit(2)

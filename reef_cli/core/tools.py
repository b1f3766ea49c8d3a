"""Where the agent binaries are: Reef's pinned copies in ``.tools/bin`` (installed by
scripts/install_agents.sh), else whatever is on ``PATH``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def tools_bin() -> Path:
    return Path(os.environ.get("REEF_TOOLS_BIN") or REPO_ROOT / ".tools" / "bin")


def find(name: str) -> str | None:
    """Absolute path of ``name`` (``pi``, ``pi-0.73``, ``claude``, ``node``), or None."""
    pinned = tools_bin() / name
    if pinned.is_file() and os.access(pinned, os.X_OK):
        return str(pinned)
    return shutil.which(name)

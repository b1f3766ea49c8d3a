"""How an agent's installed hooks find the `reef` command at run time, and what a wrapper
tells the agent about the installed release.

An install records the absolute path of this installation's ``reef`` console script (the
Claude Code hooks and pi's ``reef.json`` run it), but a venv can move or be rebuilt. So the
path is resolved when the hook runs: ``$REEF_CLI`` (set by `reef-pi`/`reef-claude` to the
``reef`` that is running now), then the recorded path, then ``reef`` on ``PATH``; when none
exists the hook says so visibly instead of failing silently. `reef doctor` flags a recorded
path that no longer exists (a stale install).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

CLI_ENV = "REEF_CLI"  # the `reef` executable a wrapper hands the agent's hooks
RELEASE_HEADER = "x-reef-release-id"  # the installed release, sent on every model request


def current_cli() -> str | None:
    """The absolute path of this installation's ``reef`` console script, if there is one:
    the one next to the running Python (a venv's ``bin/``), else ``reef`` on ``PATH``."""
    sibling = Path(sys.executable).parent / "reef"
    if sibling.is_file() and os.access(sibling, os.X_OK):
        return str(sibling.absolute())
    found = shutil.which("reef")
    return str(Path(found).absolute()) if found else None


def cli_argv() -> list[str]:
    """How to run this installation's CLI: its ``reef`` script, else ``python -m reef_cli``."""
    found = current_cli()
    return [found] if found else [sys.executable, "-m", "reef_cli"]


def is_stale(path: str | None) -> bool:
    """Whether a recorded executable path no longer exists (or is no longer executable)."""
    if not path:
        return False
    where = Path(path)
    return not (where.is_file() and os.access(where, os.X_OK))


def agent_env() -> dict[str, str]:
    """What a wrapper adds to the agent's environment so its hooks find this `reef`."""
    found = current_cli()
    return {CLI_ENV: found} if found else {}

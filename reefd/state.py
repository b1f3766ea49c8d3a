"""``reefd.json``: what a running `reefd start` is doing, for `reefd status` and `reefd stop`.

The daemon rewrites the file (atomically, 0600) at start, after every training round and
on every swap; it removes it when it stops. `reefd status` reads it and checks that the
recorded process is still a reefd, so a file left by a killed daemon reads "not running".
Nothing in it is secret: no token, no prompt.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from reef_cli.core import paths
from reef_cli.core.fsutil import atomic_write_text, read_json_object

STATE_NAME = "reefd.json"


def state_file() -> Path:
    return paths.state_dir() / STATE_NAME


def write(state: dict[str, Any]) -> None:
    paths.ensure_state_dir()
    atomic_write_text(state_file(), json.dumps(state, indent=2, default=str) + "\n", 0o600)


def read() -> dict[str, Any]:
    return read_json_object(state_file())


def retire() -> None:
    """Forget the file if it still names this process."""
    if read().get("pid") == os.getpid():
        state_file().unlink(missing_ok=True)


def _is_reefd(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(part.endswith(b"reefd") or b"reef_cli.cli.reefd" in part for part in cmdline)


def status() -> dict[str, Any]:
    """The recorded state plus ``running`` (the recorded pid is alive and is a reefd)."""
    state = read()
    pid = state.get("pid")
    running = isinstance(pid, int) and pid > 0 and _is_reefd(pid)
    if not running:
        return {"running": False, "state_dir": str(paths.state_dir().absolute())}
    return {"running": True, **state}


def stop(wait: float = 30.0) -> bool:
    """SIGTERM the recorded daemon and wait for it (it stops its engine); False if none ran."""
    pid = read().get("pid")
    if not isinstance(pid, int) or pid <= 0 or not _is_reefd(pid):
        state_file().unlink(missing_ok=True)
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and _is_reefd(pid):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    if _is_reefd(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    state_file().unlink(missing_ok=True)
    return True

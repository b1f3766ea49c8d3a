"""A `reef serve` in the background, for the agent wrappers (`reef-pi`, `reef-claude`).

If nothing answers on the configured port, one is started detached, its output in
``serve.log`` and its pid and port in ``serve.json`` in the state dir. A clear error —
with the end of the log — when it cannot start.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from reef_cli.core import paths
from reef_cli.core.config import load_settings
from reef_cli.core.errors import ServeError
from reef_cli.core.fsutil import atomic_write_text

START_TIMEOUT = 60.0


@dataclass(frozen=True)
class Running:
    url: str  # http://127.0.0.1:8901
    pid: int | None
    started: bool  # True when this call started it


def _healthy(url: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def state_file() -> Path:
    return paths.state_dir() / "serve.json"


def log_file() -> Path:
    return paths.state_dir() / "serve.log"


def ensure_running(extra_args: list[str] | None = None) -> Running:
    """The URL of a live `reef serve`, starting one in the background if needed."""
    settings = load_settings()
    url = f"http://{settings.serve_host}:{settings.serve_port}"
    if _healthy(url):
        pid = None
        if state_file().exists():
            try:
                pid = int(json.loads(state_file().read_text())["pid"])
            except (ValueError, KeyError, OSError):
                pid = None
        return Running(url, pid, started=False)
    paths.ensure_state_dir()
    argv = [
        sys.executable,
        "-m",
        "reef_cli",
        "serve",
        "--host",
        settings.serve_host,
        "--port",
        str(settings.serve_port),
        *(extra_args or []),
    ]
    with log_file().open("ab") as log:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            env=os.environ.copy(),
        )
    atomic_write_text(
        state_file(), json.dumps({"pid": process.pid, "url": url, "started_at": time.time()}) + "\n"
    )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        if _healthy(url):
            return Running(url, process.pid, started=True)
        time.sleep(0.2)
    if process.poll() is None:
        process.terminate()
    tail = _log_tail()
    raise ServeError(
        f"reef serve did not start on {url}" + (f": {tail}" if tail else ""),
        f"see {log_file()}; run `reef serve` in a terminal to watch it, or pick another port "
        "with `reef config set serve_port N`",
    )


def _log_tail() -> str:
    try:
        lines = log_file().read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def _is_reef_serve(pid: int) -> bool:
    """Whether ``pid`` still runs `reef serve` (a stale serve.json may name a pid the
    system has since given to another process). Without /proc, assume it does."""
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    try:
        argv = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False  # gone
    return b"reef_cli" in argv and b"serve" in argv


def stop(wait: float = 10.0) -> bool:
    """Stop the background server this module started (waiting up to ``wait`` seconds
    for it to exit, so its port is free again); False if none was recorded."""
    try:
        pid = int(json.loads(state_file().read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if _is_reef_serve(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 15)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and _is_reef_serve(pid):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # reap it if it is our child
            time.sleep(0.1)
    state_file().unlink(missing_ok=True)
    return True

"""Start an engine as a child process (the torch engine, SGLang) or attach to a running one.

An engine is ready when ``/health`` answers 200. One that dies first is an
``EngineError`` carrying the tail of its log, so the person sees why (a missing model, a
CUDA error) without hunting for the file. Engines run in a session of their own and are
stopped as a process group: SGLang forks schedulers and a detokenizer.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from reef_cli.core.errors import EngineError, ExtraMissing

SGLANG_INSTALL = (
    "pip install 'reef[sglang]' on a GPU host (sglang==0.5.23 with torch==2.14.1; "
    "not combinable with reef[reefd])"
)
TAIL_LINES = 5


@dataclass
class EngineProcess:
    url: str
    proc: subprocess.Popen[bytes] | None  # None: attached, not ours to stop
    kind: str  # torch | sglang | attached
    log_path: Path | None = None

    def alive(self) -> bool:
        return self.proc is None or self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the engine's process group, SIGKILL what is left after ``timeout``."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        _signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait(timeout)

    def __enter__(self) -> EngineProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # start_new_session: the group id is the child's pid
    except ProcessLookupError:
        pass
    except PermissionError:
        proc.send_signal(sig)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def log_tail(path: Path | None, lines: int = TAIL_LINES) -> list[str]:
    """The last non-empty lines of ``path`` (progress bars' carriage returns split too)."""
    if path is None:
        return []
    try:
        data = path.read_bytes()[-16384:].decode("utf-8", "replace")
    except OSError:
        return []
    kept = [line.strip() for line in data.replace("\r", "\n").splitlines() if line.strip()]
    return kept[-lines:]


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def _die_with_parent() -> None:
    """In the engine, before exec: SIGTERM when reefd dies, however it dies (a SIGKILLed
    daemon must not leave an engine holding its port and its memory). Linux only."""
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _start(
    argv: list[str], *, url: str, kind: str, what: str, log_path: Path | None, timeout: float
) -> EngineProcess:
    if log_path is None:
        fd, name = tempfile.mkstemp(prefix=f"reefd-{kind}-", suffix=".log")
        os.close(fd)
        log_path = Path(name)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    engine = EngineProcess(url, proc, kind, log_path)
    deadline = time.monotonic() + timeout
    while True:
        code = proc.poll()
        if code is not None:
            raise _died(what, f"exited with code {code} before it was ready", log_path)
        if _healthy(url):
            return engine
        if time.monotonic() > deadline:
            engine.stop()
            raise _died(what, f"was not ready within {timeout:.0f} s", log_path)
        time.sleep(0.1)


def _died(what: str, how: str, log_path: Path) -> EngineError:
    tail = log_tail(log_path)
    last = f": {tail[-1]}" if tail else ""
    shown = " | ".join(tail) if tail else "empty"
    return EngineError(f"{what} {how}{last}", f"read {log_path} (last lines: {shown})")


def launch_torch(
    model: str,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    device: str = "cpu",
    seed: int = 0,
    log_path: Path | None = None,
    weight_version: str = "base",
    dtype: str = "float32",
    extra_args: Sequence[str] = (),
    timeout: float = 300.0,
) -> EngineProcess:
    """Run ``python -m reefd.engine.torch_server`` for ``model`` and wait for /health;
    ``port=0`` picks a free one."""
    port = port or free_port(host)
    argv = [sys.executable, "-m", "reefd.engine.torch_server", "--model", model]
    argv += ["--host", host, "--port", str(port), "--device", device, "--seed", str(seed)]
    argv += ["--weight-version", weight_version, "--dtype", dtype, *extra_args]
    return _start(
        argv,
        url=f"http://{host}:{port}",
        kind="torch",
        what=f"the torch engine ({model})",
        log_path=log_path,
        timeout=timeout,
    )


def sglang_available() -> bool:
    return importlib.util.find_spec("sglang") is not None


def sglang_argv(
    model_path: str, *, host: str, port: int, extra_args: Sequence[str] = ()
) -> list[str]:
    argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", model_path]
    argv += ["--host", host, "--port", str(port), "--weight-version", "base", *extra_args]
    return argv


def launch_sglang(
    model_path: str,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    extra_args: Sequence[str] = (),
    log_path: Path | None = None,
    timeout: float = 900.0,
) -> EngineProcess:
    """Run SGLang's server (its first start compiles kernels: minutes) and wait for /health."""
    if not sglang_available():
        raise ExtraMissing(
            "reefd's sglang engine needs sglang, which is not installed", SGLANG_INSTALL
        )
    port = port or free_port(host)
    return _start(
        sglang_argv(model_path, host=host, port=port, extra_args=extra_args),
        url=f"http://{host}:{port}",
        kind="sglang",
        what=f"SGLang ({model_path})",
        log_path=log_path,
        timeout=timeout,
    )


def attach(url: str, *, kind: str = "attached", timeout: float = 10.0) -> EngineProcess:
    """An engine someone else runs: checked once (``/health``), never stopped by reefd."""
    url = url.rstrip("/")
    deadline = time.monotonic() + timeout
    while not _healthy(url):
        if time.monotonic() > deadline:
            raise EngineError(
                f"no engine answers at {url}/health",
                "start the engine first, or check engine.url in reefd.yaml",
            )
        time.sleep(0.2)
    return EngineProcess(url, None, kind)

"""`reef serve` in the background for the agent wrappers (`reef-pi`, `reef-claude`), and
the state file every `reef serve` keeps in its state dir.

- Every `reef serve` writes ``serve.json`` (pid, url, port, idle limit) in its state dir
  while it runs and removes it when it stops; ``serve.port`` remembers the port after.
- ``ensure_running()`` uses a serve only when it is this state dir's own: recorded in
  ``serve.json``, still a `reef serve` process, healthy, and accepting this state dir's
  token. A serve of another state dir on the configured port is left alone: a new one
  starts on a free port (remembered in ``serve.port`` for the next time).
- A serve the wrapper starts gets ``--idle-exit`` (``$REEF_SERVE_IDLE_EXIT`` seconds,
  default 900; 0 keeps it running): it stops once no request, agent session started by a
  wrapper (``serve-clients/``) or job of its own has been active for that long.
- ``stop()`` / ``status()`` back `reef serve stop|status`.

A clear error — with the end of ``serve.log`` — when a serve cannot start.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reef_cli.core import paths
from reef_cli.core.config import load_settings
from reef_cli.core.errors import ServeError
from reef_cli.core.fsutil import atomic_write_text, read_json_object

START_TIMEOUT = 60.0
IDLE_ENV = "REEF_SERVE_IDLE_EXIT"
DEFAULT_IDLE_EXIT = 900.0
CLIENTS_DIR = "serve-clients"

log = logging.getLogger("reef.serve")


@dataclass(frozen=True)
class Running:
    url: str  # http://127.0.0.1:8901
    pid: int | None
    started: bool  # True when this call started it


# ------------------------------------------------------------------ the state files


def state_file() -> Path:
    return paths.state_dir() / "serve.json"


def port_file() -> Path:
    return paths.state_dir() / "serve.port"


def log_file() -> Path:
    return paths.state_dir() / "serve.log"


def clients_dir() -> Path:
    return paths.state_dir() / CLIENTS_DIR


def read_state() -> dict[str, Any]:
    """``serve.json`` as a dict ({} when absent or unreadable)."""
    return read_json_object(state_file())


def _pid_of(state: dict[str, Any]) -> int | None:
    pid = state.get("pid")
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None


def remembered_port() -> int | None:
    try:
        port = int(port_file().read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
    return port if 0 < port < 65536 else None


def _write_state(state: dict[str, Any]) -> None:
    paths.ensure_state_dir()
    atomic_write_text(state_file(), json.dumps(state, indent=2) + "\n")
    port = state.get("port")
    if isinstance(port, int) and port > 0:
        atomic_write_text(port_file(), f"{port}\n")


def announce(host: str, port: int, idle_exit: float | None, background: bool) -> Path | None:
    """Called by `reef serve` as it starts: record this process in ``serve.json``.
    Returns the file, for ``retire``; None when another live serve is recorded there (the
    first one keeps the record: a second serve that fails to bind must not erase it)."""
    other = _pid_of(read_state())
    if other is not None and other != os.getpid() and _is_reef_serve(other):
        return None
    _write_state(
        {
            "pid": os.getpid(),
            "url": f"http://{_url_host(host)}:{port}" if port else None,
            "host": host,
            "port": port,
            "started_at": time.time(),
            "idle_exit": idle_exit,
            "background": background,
            "state_dir": str(paths.state_dir().absolute()),
        }
    )
    return state_file()


def retire(path: Path | None) -> None:
    """Called by `reef serve` as it stops: forget ``serve.json`` if it still names us."""
    if path is None:
        return
    if read_json_object(path).get("pid") == os.getpid():
        path.unlink(missing_ok=True)


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


# ------------------------------------------------------------------ probes


def _healthy(url: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def _accepts(url: str, token: str) -> bool:
    """Whether the serve at ``url`` accepts ``token`` (an authenticated, cheap call)."""
    import httpx

    try:
        response = httpx.get(
            f"{url}/reef/scenarios", headers={"authorization": f"Bearer {token}"}, timeout=5.0
        )
    except httpx.HTTPError:
        return False
    return response.status_code == 200


def _is_reef_serve(pid: int) -> bool:
    """Whether ``pid`` still runs `reef serve` (a stale serve.json may name a pid the
    system has since given to another process). Without /proc, whether it is alive."""
    proc = Path("/proc")
    if not proc.is_dir():
        return _alive(pid)
    try:
        argv = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False  # gone
    if not (b"serve" in argv and any(b"reef" in a for a in argv)):
        return False
    try:  # a zombie (exited, not yet reaped) serves nothing
        stat = (proc / str(pid) / "stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _port_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def pick_port(host: str, configured: int) -> int:
    """The remembered port if free, else the configured one if free, else a free one."""
    for port in (remembered_port(), configured):
        if port and _port_free(host, port):
            return port
    return _free_port(host)


# ------------------------------------------------------------------ the wrapper's serve


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    """One wrapper at a time decides whether to start a serve for this state dir."""
    paths.ensure_state_dir()
    with (paths.state_dir() / "serve.lock").open("a") as handle:
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def idle_exit_seconds() -> float:
    """The idle limit for a serve the wrapper starts (``$REEF_SERVE_IDLE_EXIT``)."""
    raw = os.environ.get(IDLE_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_IDLE_EXIT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise ServeError(
            f"${IDLE_ENV} is {raw!r}, not a number of seconds",
            f"export {IDLE_ENV}=900 (0 keeps the background serve running)",
        )
    return value


def _own(state: dict[str, Any], token: str, wait: float) -> str | None:
    """The URL of the serve ``state`` records, if it runs, answers and accepts ``token``
    (waiting up to ``wait`` seconds for one that is still starting)."""
    pid, url = _pid_of(state), state.get("url")
    if pid is None or not isinstance(url, str) or not url:
        return None
    deadline = time.monotonic() + wait
    while True:
        if not _is_reef_serve(pid):
            return None
        if _healthy(url):
            return url if _accepts(url, token) else ""
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.2)


def ensure_running(extra_args: list[str] | None = None) -> Running:
    """The URL of this state dir's live `reef serve`, starting one in the background if
    there is none (on the remembered, the configured or else a free port)."""
    from reef_cli.core import tokens

    token = tokens.main_token(create=True) or ""
    with _lock():
        state = read_state()
        url = _own(state, token, START_TIMEOUT)
        if url:
            return Running(url, _pid_of(state), started=False)
        if url == "":  # ours, but it no longer accepts this state dir's token
            if not state.get("background"):
                raise ServeError(
                    f"the reef serve of this state dir (pid {_pid_of(state)}, {state.get('url')}) "
                    "does not accept its token",
                    "restart it with the same REEF_TOKEN, or stop it: `reef serve stop`",
                )
            stop()
        return _start(token, extra_args or [])


def _start(token: str, extra_args: list[str]) -> Running:
    settings = load_settings()
    host = settings.serve_host
    port = pick_port(host, settings.serve_port)
    url = f"http://{_url_host(host)}:{port}"
    idle = idle_exit_seconds()
    argv = [sys.executable, "-m", "reef_cli", "serve", "--host", host, "--port", str(port)]
    argv += ["--idle-exit", f"{idle:g}", "--background", *extra_args]
    paths.ensure_state_dir()
    with log_file().open("ab") as log_handle:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log_handle,
            stderr=log_handle,
            start_new_session=True,
            env=os.environ.copy(),
        )
    # The serve writes the same itself once it runs; written here too so that a second
    # wrapper waiting on the lock finds it while it is still starting.
    _write_state(
        {
            "pid": process.pid,
            "url": url,
            "host": host,
            "port": port,
            "started_at": time.time(),
            "idle_exit": idle,
            "background": True,
            "state_dir": str(paths.state_dir().absolute()),
        }
    )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        if _healthy(url):
            if _accepts(url, token):
                return Running(url, process.pid, started=True)
            break  # something else answers there (it took the port first)
        time.sleep(0.2)
    if process.poll() is None:
        process.terminate()
    with contextlib.suppress(OSError, ValueError):
        if _pid_of(read_state()) == process.pid:
            state_file().unlink()
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


def stop(wait: float = 10.0) -> bool:
    """Stop this state dir's recorded `reef serve` (waiting up to ``wait`` seconds for it to
    exit, so its port is free again); False if none was recorded."""
    pid = _pid_of(read_state())
    if pid is None:
        state_file().unlink(missing_ok=True)
        return False
    if _is_reef_serve(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and _is_reef_serve(pid):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # reap it if it is our child
            time.sleep(0.1)
    state_file().unlink(missing_ok=True)
    return True


def status() -> dict[str, Any]:
    """What `reef serve status` shows: whether this state dir's serve runs, and how."""
    from reef_cli.core import tokens

    state = read_state()
    pid = _pid_of(state)
    running = pid is not None and _is_reef_serve(pid)
    out: dict[str, Any] = {
        "running": running,
        "state_dir": str(paths.state_dir().absolute()),
        "port": state.get("port") if running else remembered_port(),
    }
    if not running:
        return out
    url = str(state.get("url") or "")
    healthy = bool(url) and _healthy(url)
    token = tokens.main_token(create=False)
    out.update(
        {
            "pid": pid,
            "url": url or None,
            "healthy": healthy,
            "accepts_token": bool(healthy and token and _accepts(url, token)),
            "background": bool(state.get("background")),
            "idle_exit": state.get("idle_exit"),
            "started_at": state.get("started_at"),
            "clients": len(live_clients()),
        }
    )
    return out


# ------------------------------------------------------------------ agent sessions


def _start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot), to tell a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def register_client(pid: int | None = None) -> None:
    """Mark an agent session (the wrapper's pid, which the agent keeps after exec) as
    using this state dir's serve: its idle clock does not run while the session lives."""
    pid = pid or os.getpid()
    folder = clients_dir()
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / str(pid), (_start_time(pid) or "") + "\n")


def live_clients() -> list[int]:
    """Registered agent sessions still running (the others are forgotten)."""
    folder = clients_dir()
    if not folder.is_dir():
        return []
    alive = []
    for entry in folder.iterdir():
        try:
            pid = int(entry.name)
            recorded = entry.read_text().strip()
        except (ValueError, OSError):
            continue
        now = _start_time(pid)
        gone = now is None if Path("/proc").is_dir() else not _alive(pid)
        if gone or (recorded and now and recorded != now):
            entry.unlink(missing_ok=True)
            continue
        alive.append(pid)
    return alive


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ------------------------------------------------------------------ the idle exit


def open_connections(port: int) -> int | None:
    """Established client connections to ``port`` held by this process (None without
    /proc: then idleness cannot be measured)."""
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return None
    inodes = set()
    for fd in fds:
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/self/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    count = 0
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != "01":  # 01: ESTABLISHED
                continue
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port and fields[9] in inodes:
                count += 1
    return count


def _own_jobs_active(since: float) -> bool:
    """Whether a job this serve took (its file written since ``since``) is still active."""
    from reef_cli.core.jobs import ACTIVE

    folder = paths.state_dir() / "jobs"
    if not folder.is_dir():
        return False
    for path in folder.glob("job_*.json"):
        try:
            if path.stat().st_mtime < since:
                continue
            if json.loads(path.read_text(encoding="utf-8")).get("state") in ACTIVE:
                return True
        except (OSError, ValueError, AttributeError, RecursionError):
            continue
    return False


class IdleExit(threading.Thread):
    """Calls ``on_idle`` (default: SIGTERM to this process, which uvicorn turns into a
    clean shutdown) once nothing has used the serve on ``port`` for ``seconds``: no open
    client connection, no live registered agent session, no active job of its own."""

    def __init__(
        self, port: int, seconds: float, on_idle: Callable[[], None] | None = None
    ) -> None:
        super().__init__(name="reef-idle-exit", daemon=True)
        self.port = port
        self.seconds = seconds
        self.on_idle = on_idle or self._terminate
        self.started_at = time.time()
        self._stop_event = threading.Event()

    def busy(self) -> bool:
        connections = open_connections(self.port)
        return bool(connections) or bool(live_clients()) or _own_jobs_active(self.started_at)

    def run(self) -> None:
        step = min(1.0, max(0.05, self.seconds / 5))
        last = time.monotonic()
        while not self._stop_event.wait(step):
            try:
                if self.busy():
                    last = time.monotonic()
                    continue
            except Exception:  # a probe failing must never stop the server
                last = time.monotonic()
                continue
            if time.monotonic() - last >= self.seconds:
                log.info("idle for %gs (--idle-exit): stopping", self.seconds)
                self.on_idle()
                return

    def cancel(self) -> None:
        self._stop_event.set()

    @staticmethod
    def _terminate() -> None:
        os.kill(os.getpid(), signal.SIGTERM)


def watch_idle(port: int, seconds: float | None) -> IdleExit | None:
    """Start the idle exit for `reef serve --idle-exit SECONDS` (None/0: never)."""
    if not seconds or seconds <= 0 or not port:
        return None
    if open_connections(port) is None:
        log.warning("--idle-exit needs /proc to see connections; the serve will not idle-exit")
        return None
    watcher = IdleExit(port, seconds)
    watcher.start()
    return watcher

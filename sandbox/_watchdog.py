"""A watchdog that outlives its caller: when the Reef process dies - SIGKILL included - it
kills that process's sandboxes and cleans up after them at once.

bwrap alone cannot promise this. Its sandbox PID 1 sets its parent-death signal only
after ``--block-fd`` lets it go, and an EOF on that fd (the caller's end closed by its
death) lets it go as well as a write does: a caller killed while bwrap is held (rlimits
being set, pasta starting) left PID 1 to start the command, reparented to init, with no
wall clock. So every run is registered, before bwrap is spawned, with one small process
per caller (started on the first run, in its own session, ~10 ms once):

- it receives a copy of the write end of the run's ``--block-fd`` pipe, so the caller's
  death is never an EOF there: a held sandbox stays held;
- it sees the caller's death as an EOF on its socket, SIGKILLs each run still registered
  (its bwrap and pasta, found by the run's token; the pid namespace goes with PID 1),
  gives the leased trees back and removes the run's temp dir (``_runs.reclaim``).

Registration is one ``sendmsg`` per run. If the watchdog cannot be started, runs go on
without it, and the next run's sweep cleans up after a dead caller.

Run as a script (``python -I -S _watchdog.py``) it is the watchdog itself: only the
standard library until its caller dies.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

_lock = threading.Lock()
_state: tuple[int, socket.socket, subprocess.Popen[bytes]] | None = None


class _Detached(subprocess.Popen[bytes]):
    """The watchdog must outlive this process: no "still running" warning at exit."""

    def __del__(self) -> None:
        pass


def _start() -> tuple[int, socket.socket, subprocess.Popen[bytes]] | None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        proc = _Detached(
            [sys.executable, "-I", "-S", str(Path(__file__).resolve())],
            stdin=theirs.fileno(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            cwd="/",  # holds no dir (or mount) of the caller's busy
        )
    except OSError:
        ours.close()
        return None
    finally:
        theirs.close()
    return os.getpid(), ours, proc


def _sock() -> socket.socket | None:
    global _state
    with _lock:
        if _state is None or _state[0] != os.getpid() or _state[2].poll() is not None:
            _state = _start()
        return _state[1] if _state else None


def register(run: Path, block_w: int) -> bool:
    """Hand the watchdog this run (and a copy of its block fd). False: no watchdog."""
    sock = _sock()
    if sock is None:
        return False
    try:
        socket.send_fds(sock, [b"+" + str(run).encode()], [block_w], socket.MSG_DONTWAIT)
    except OSError:
        return False
    return True


def unregister(run: Path) -> None:
    """The run is over and cleaned up: the watchdog drops it (and its fd copy)."""
    state = _state
    if state is None or state[0] != os.getpid():
        return
    with contextlib.suppress(OSError):
        state[1].send(b"-" + str(run).encode(), socket.MSG_DONTWAIT)


def _log(text: str) -> None:
    """Where ``$REEF_SANDBOX_WATCHDOG_LOG`` names a file, say what the watchdog does."""
    path = os.environ.get("REEF_SANDBOX_WATCHDOG_LOG")
    if path:
        with contextlib.suppress(OSError), open(path, "a") as fh:
            fh.write(f"{time.time():.3f} {os.getpid()} {text}\n")


def _main() -> None:
    sock = socket.socket(fileno=0)
    held: dict[str, int] = {}
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 4096, 4)
        except InterruptedError:
            continue
        except OSError:
            break
        if not msg:
            break  # EOF: the caller is gone
        path = msg[1:].decode(errors="replace")
        old = held.pop(path, None)
        if old is not None:
            os.close(old)
        if msg[:1] == b"+" and fds:
            held[path] = fds[0]
            fds = fds[1:]
        for fd in fds:
            os.close(fd)
    _log(f"caller gone; reclaiming {sorted(held)}")
    if not held:
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from sandbox import _runs

    for path, fd in held.items():
        # Kill first, while the block fd is still held: a held sandbox never starts.
        try:
            _log(f"{path}: reclaimed={_runs.reclaim(Path(path))}")
        except Exception as exc:  # keep going: the next run's sweep retries
            _log(f"{path}: {type(exc).__name__}: {exc}")
        os.close(fd)


if __name__ == "__main__":
    _main()

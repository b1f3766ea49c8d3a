"""Each bwrap run's own temp dir, and the clean-up of runs whose caller died.

A run lives in ``$TMPDIR/reef-sandbox-<euid>/run-<token>/`` (0700), flocked by the caller
for as long as it lives; in it ``run.json`` (what to give back: the leased trees),
``home/`` (the sandbox's HOME unless the caller passed one) and ``netns`` (the pinned
network namespace pasta joins). The token also appears on bwrap's and pasta's command
lines, so the processes of a run can be found from outside its pid namespace.

A run dir whose lock can be taken (and that is older than a moment) is dead: its caller
exited without cleaning up (SIGKILL, OOM). ``reclaim`` then SIGKILLs what still runs for
it, hands the leased trees back (owners restored, set-id bits stripped), unmounts the
namespace file and removes the dir.
The caller's watchdog (``_watchdog``) does this the moment its caller dies; ``sweep`` at
the start of every run does it for whatever a dead watchdog left. A live run's lock is
held, so neither ever touches it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import fcntl
import json
import os
import secrets
import shutil
import signal
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

from reef_cli.core.errors import SandboxError

from ._owner import Lease

MNT_DETACH = 2
KILL_WAIT_S = 5.0
YOUNG_S = 2.0  # a sweep leaves a run dir this young alone (not locked yet)
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def base_dir() -> Path:
    """Reef's sandbox temp dir for this euid, made 0700; refused if someone else owns it."""
    base = Path(tempfile.gettempdir()) / f"reef-sandbox-{os.geteuid()}"
    with contextlib.suppress(FileExistsError):
        os.mkdir(base, 0o700)
    st = os.lstat(base)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise SandboxError(
            f"{base} is not a private directory of this user",
            f"remove it (it should be a 0700 dir owned by uid {os.geteuid()}), or set TMPDIR",
        )
    return base


class RunDir:
    """One live run's dir, flocked (the dir itself) until ``close``."""

    def __init__(self) -> None:
        base = base_dir()
        self.token = secrets.token_hex(8)
        self.path = base / f"run-{self.token}"
        os.mkdir(self.path, 0o700)
        self.lock_fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def save(self, workdir: Path, leases: list[Lease]) -> None:
        """Write what a clean-up needs, before anything is lent (one small write)."""
        data = {
            "pid": os.getpid(),
            "workdir": str(workdir),
            "leases": [lease.as_dict() for lease in leases],
        }
        fd = os.open(self.path / "run.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, json.dumps(data).encode())
        finally:
            os.close(fd)

    def close(self) -> None:
        """Remove the dir (the caller has already given its leases back) and unlock."""
        with contextlib.suppress(OSError):  # a later sweep retries
            _remove(self.path)
        os.close(self.lock_fd)


def tagged(token: str) -> list[int]:
    """Live (not zombie) host processes whose command line holds ``token``."""
    needle = token.encode()
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if needle not in fh.read():
                    continue
        except OSError:
            continue
        found.append(int(entry))
    return found


def kill_tagged(token: str) -> None:
    """SIGKILL every process of the run and wait (bounded) until none runs any more.

    Killing the sandbox's PID 1 takes its whole pid namespace: the command's processes
    never carry the token themselves, but all die with it."""
    deadline = time.monotonic() + KILL_WAIT_S
    while True:
        pids = tagged(token)
        if not pids or time.monotonic() > deadline:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def reclaim(run: Path) -> bool:
    """Clean up a dead run (see the module doc); False when its caller still holds it."""
    try:
        fd = os.open(run, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        if not run.exists():  # another sweeper finished it between our open and flock
            return True
        kill_tagged(run.name.removeprefix("run-"))
        netns = run / "netns"
        if netns.exists():
            _libc.umount2(str(netns).encode(), MNT_DETACH)
        for lease in _load(run).get("leases", []):
            with contextlib.suppress(Exception):
                Lease.from_dict(lease).give_back()
        _remove(run)
        return True
    finally:
        os.close(fd)


def _remove(run: Path) -> None:
    """Remove a run dir: its few known entries directly (cheap), else rmtree, retried
    briefly (a dying sandbox may still hold an entry); raises OSError naming what stayed,
    for the watchdog's log (a later sweep tries again)."""
    with contextlib.suppress(OSError):
        for name in ("run.json",):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(run / name)
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(run / "home")
        os.rmdir(run)
        return
    errors: list[str] = []
    for attempt in range(6):
        errors.clear()
        shutil.rmtree(run, onerror=lambda _f, path, exc: errors.append(f"{path}: {exc[1]}"))
        if not os.path.lexists(run):
            return
        time.sleep(0.01 * 2**attempt)
    raise OSError(f"could not remove {run}: {errors[:3]}")


def _load(run: Path) -> dict[str, Any]:
    try:
        data = json.loads((run / "run.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def sweep(skip: Path | None = None) -> int:
    """Reclaim every dead run of this euid; live runs (locked) are left alone."""
    try:
        base = base_dir()
        entries = list(os.scandir(base))
    except (OSError, SandboxError):
        return 0
    done = 0
    for entry in entries:
        path = Path(entry.path)
        if path == skip:
            continue
        if not entry.name.startswith("run-"):
            continue
        with contextlib.suppress(OSError):
            # A run locks its dir right after making it; one this young may not have yet.
            if time.time() - entry.stat(follow_symlinks=False).st_ctime < YOUNG_S:
                continue
            done += reclaim(path)
    return done

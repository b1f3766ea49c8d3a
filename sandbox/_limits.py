"""rlimits for a sandboxed command, set before it runs so everything it starts inherits them.

In bwrap mode they are set with ``prlimit(2)`` on the sandbox's PID 1 while bwrap holds it
on ``--block-fd``: no ``preexec_fn`` (which would make Python ``fork`` instead of
``vfork``) and no extra exec. The ``none`` mode uses ``preexec``.

RLIMIT_NPROC counts the processes of one uid in one user namespace, so the cap is "what
already counts there + the policy's pids"; the kernel never enforces it for host root.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import signal
from collections.abc import Callable

from ._policy import Limits

MB = 1024 * 1024
PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def count_processes(uid: int) -> int:
    """How many processes (threads count for NPROC too) host ``uid`` runs now.

    One ``stat`` per process: ``/proc/PID/task`` is owned like ``/proc/PID`` and its link
    count is 2 + the number of threads, so no directory listing is needed."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{entry}/task")
        except OSError:
            continue
        if st.st_uid == uid:
            total += max(1, st.st_nlink - 2)
    return total


def rlimit_pairs(limits: Limits, nproc_base: int | None) -> list[tuple[int, int]]:
    """(resource, value) pairs for ``limits``; computed in the parent (no work post-fork).

    ``nproc_base``: processes that already count against RLIMIT_NPROC (None: not set)."""
    pairs: list[tuple[int, int]] = [(resource.RLIMIT_CORE, 0)]
    if limits.cpu_s is not None:
        pairs.append((resource.RLIMIT_CPU, int(limits.cpu_s)))
    if limits.memory_mb is not None:
        pairs.append((resource.RLIMIT_AS, int(limits.memory_mb) * MB))
    if limits.file_mb is not None:
        pairs.append((resource.RLIMIT_FSIZE, int(limits.file_mb) * MB))
    if limits.open_files is not None:
        pairs.append((resource.RLIMIT_NOFILE, int(limits.open_files)))
    if limits.pids is not None and nproc_base is not None:
        pairs.append((resource.RLIMIT_NPROC, nproc_base + int(limits.pids)))
    return pairs


def soft_hard(pairs: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(resource, soft, hard) for ``pairs``, never above the hard limit the child inherits
    (this process's). CPU: SIGXCPU at the soft limit (reported as "cpu"), SIGKILL a second
    later."""
    out: list[tuple[int, int, int]] = []
    for res, value in pairs:
        _soft, hard = resource.getrlimit(res)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        top = value + 1 if res == resource.RLIMIT_CPU else value
        if hard != resource.RLIM_INFINITY:
            top = min(top, hard)
        out.append((res, value, top))
    return out


def apply_to(pid: int, pairs: list[tuple[int, int]]) -> None:
    """Set ``pairs`` on process ``pid`` (the sandbox's PID 1, still blocked by bwrap)."""
    for res, soft, hard in soft_hard(pairs):
        resource.prlimit(pid, res, (soft, hard))


def die_with_parent() -> None:
    """In a child before exec: SIGKILL it when the thread that spawned it ends."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def preexec(pairs: list[tuple[int, int]]) -> Callable[[], None]:
    """A preexec_fn that applies ``pairs`` (never raising the hard limit), resets SIGPIPE
    and ties the child to this thread's life (a dead Reef leaves no sandbox running)."""
    limits = soft_hard(pairs)

    def apply() -> None:
        die_with_parent()
        for res, soft, hard in limits:
            resource.setrlimit(res, (soft, hard))
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)

    return apply


def node_options(limits: Limits, env: dict[str, str]) -> None:
    """Cap the V8 heap through NODE_OPTIONS (RLIMIT_AS would break Node)."""
    if limits.node_heap_mb is None:
        return
    flag = f"--max-old-space-size={int(limits.node_heap_mb)}"
    env["NODE_OPTIONS"] = f"{env['NODE_OPTIONS']} {flag}" if env.get("NODE_OPTIONS") else flag


def killed_by(returncode: int, timed_out: bool) -> str | None:
    """Name what ended the process: a limit or a signal (bwrap reports 128+N)."""
    if timed_out:
        return "wall"
    sig = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    if not sig or sig >= 65:
        return None
    if sig == signal.SIGXCPU:
        return "cpu"
    if sig == signal.SIGXFSZ:
        return "file_size"
    try:
        return f"signal:{signal.Signals(sig).name}"
    except ValueError:
        return f"signal:{sig}"

"""Give memory back after large answers: glibc's allocator settings for `reef serve`.

CPython hands every object over 512 bytes (an answer's bytes, its decoded text) to
``malloc``. glibc serves a large block from ``mmap`` only below its *dynamic* threshold,
which rises to the size of the largest block freed (up to 32 MiB): after the first 10 MB
answer, every later one lives in the heap arenas, and the threads that touched them (the
event loop, the recorder, ``to_thread`` workers) each keep an arena of their own that is
never handed back. 60 chats of 10 MB answers held 3.9 GiB that way.

``tune()`` pins the threshold (blocks of 128 KiB and more are ``mmap``-ed, so freeing one
unmaps it), caps the arenas at two and sets the heap's trim threshold, each only where
its environment variable (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_ARENA_MAX``,
``MALLOC_TRIM_THRESHOLD_``) does not already say otherwise. ``Trimmer`` calls
``malloc_trim(0)`` once the server has relayed enough bytes since the last call and has
been quiet for a moment: what is still fragmented below the threshold goes back too.
Both do nothing where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import time
from functools import cache

from reef_cli.server.periodic import Periodic

log = logging.getLogger("reef.serve")

# mallopt(3) parameters
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8

#: environment variable -> (mallopt parameter, value Reef uses when it is unset)
SETTINGS = {
    "MALLOC_MMAP_THRESHOLD_": (M_MMAP_THRESHOLD, 128 * 1024),
    "MALLOC_TRIM_THRESHOLD_": (M_TRIM_THRESHOLD, 1024 * 1024),
    "MALLOC_ARENA_MAX": (M_ARENA_MAX, 2),
}
TRIM_AFTER_BYTES = 16 * 1024 * 1024  # relayed since the last trim before another is due
TRIM_QUIET_S = 1.0  # ... and no answer finished for this long


@cache
def _libc() -> ctypes.CDLL | None:
    """glibc, when this process runs on it (mallopt and malloc_trim are glibc's)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    wanted = ("gnu_get_libc_version", "malloc_trim", "mallopt")  # musl lacks them
    return libc if all(hasattr(libc, fn) for fn in wanted) else None


def tune() -> dict[str, int]:
    """Apply the settings whose variable is unset; returns what was applied."""
    libc = _libc()
    if libc is None:
        return {}
    applied = {}
    for env, (param, value) in SETTINGS.items():
        if os.environ.get(env):
            continue  # the operator chose
        if libc.mallopt(ctypes.c_int(param), ctypes.c_int(value)) == 1:
            applied[env] = value
    return applied


def trim() -> bool:
    """Hand the free pages of every arena back to the system (``malloc_trim(0)``)."""
    libc = _libc()
    return bool(libc.malloc_trim(ctypes.c_size_t(0))) if libc is not None else False


class Trimmer(Periodic):
    """Counts the bytes answers carried, and trims in the background when it is worth
    its cost (a few milliseconds on a large heap): enough bytes since the last trim, and
    no answer for ``quiet_s``, so it never holds up a burst."""

    name = "reef-trim"

    def __init__(self, after_bytes: int = TRIM_AFTER_BYTES, quiet_s: float = TRIM_QUIET_S) -> None:
        super().__init__(quiet_s / 2)
        self.after_bytes = after_bytes
        self.quiet_s = quiet_s
        self.pending = 0  # bytes relayed since the last trim
        self.last_answer = 0.0
        self.trims = 0

    def note(self, size: int) -> None:
        """An answer of ``size`` bytes has been relayed (the event loop calls it)."""
        self.pending += size
        self.last_answer = time.monotonic()

    def due(self) -> bool:
        return (
            self.pending >= self.after_bytes and time.monotonic() - self.last_answer >= self.quiet_s
        )

    def run_once(self) -> None:
        """Trim if due."""
        if not self.due():
            return
        self.pending = 0
        trim()
        self.trims += 1

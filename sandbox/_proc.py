"""Start a process in its own session, stream its output, enforce the wall clock.

A new session lets one ``killpg`` take down the whole tree on a timeout. One selector loop
(pipes + a pidfd) drains output as it arrives (``on_output``) and notices the exit at once:
no reader threads to start and no polling sleeps, which keeps a short run cheap.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ._policy import Result

OnOutput = Callable[[str, str], None]
MAX_KEEP = 16 * 1024 * 1024  # per stream; the tail is kept
DRAIN_AFTER_EXIT_S = 2.0


class Spawned:
    """A running process whose stdout/stderr are drained by ``wait``."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str],
        cwd: str | None = None,
        preexec: Callable[[], None] | None = None,
        pass_fds: Sequence[int] = (),
        on_output: OnOutput | None = None,
    ) -> None:
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            preexec_fn=preexec,
            pass_fds=tuple(pass_fds),
            start_new_session=True,
        )
        self.on_output = on_output
        self._chunks: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self._kept = {"stdout": 0, "stderr": 0}
        self._decoders = {
            name: codecs.getincrementaldecoder("utf-8")(errors="replace")
            for name in ("stdout", "stderr")
        }

    def _take(self, name: str, data: bytes) -> None:
        text = self._decoders[name].decode(data, final=not data)
        if not text:
            return
        chunks = self._chunks[name]
        chunks.append(text)
        self._kept[name] += len(text)
        while self._kept[name] > MAX_KEEP and len(chunks) > 1:
            self._kept[name] -= len(chunks.pop(0))
        if self.on_output is not None:
            with contextlib.suppress(Exception):
                self.on_output(name, text)

    def wait(self, wall_s: float | None) -> tuple[int, bool]:
        """Drain output until exit or the wall limit (then kill the session).

        Returns (returncode, timed_out)."""
        deadline = None if wall_s is None else self.started + wall_s
        pidfd = os.pidfd_open(self.proc.pid)
        sel = selectors.DefaultSelector()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        for name, pipe in (("stdout", self.proc.stdout), ("stderr", self.proc.stderr)):
            os.set_blocking(pipe.fileno(), False)
            sel.register(pipe.fileno(), selectors.EVENT_READ, name)
        sel.register(pidfd, selectors.EVENT_READ, "exit")
        timed_out = exited = False
        drain_until: float | None = None
        try:
            while len(sel.get_map()) > (0 if exited else 1) or not exited:
                now = time.monotonic()
                if not exited and deadline is not None and now >= deadline:
                    timed_out = True
                    self.kill()
                limit = drain_until if exited else deadline
                if exited and limit is not None and now >= limit:
                    break
                timeout = None if limit is None else max(0.0, limit - now)
                for key, _ in sel.select(timeout):
                    if key.data == "exit":
                        sel.unregister(pidfd)
                        exited = True
                        self.proc.wait()
                        # Whatever the command left in its session dies with it.
                        self.kill()
                        drain_until = time.monotonic() + DRAIN_AFTER_EXIT_S
                        continue
                    try:
                        data = os.read(key.fd, 65536)
                    except BlockingIOError:
                        continue
                    self._take(key.data, data)
                    if not data:
                        sel.unregister(key.fd)
                if exited and len(sel.get_map()) == 0:
                    break
        finally:
            sel.close()
            os.close(pidfd)
            self.proc.stdout.close()
            self.proc.stderr.close()
        return self.proc.wait(), timed_out

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def result(self, rc: int, timed_out: bool, mode: str, workdir: Path) -> Result:
        """The run's ``Result``: exit status, what it printed, why it was killed."""
        from ._limits import killed_by

        return Result(
            returncode=rc,
            stdout=self.output("stdout"),
            stderr=self.output("stderr"),
            timed_out=timed_out,
            killed_by=killed_by(rc, timed_out),
            mode=mode,
            duration_s=self.elapsed(),
            workdir=workdir,
        )

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def output(self, name: str) -> str:
        return "".join(self._chunks[name])

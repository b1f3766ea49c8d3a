"""The record writer process as ``reef serve`` sees it: start it, tell it about new
journal segments, read its reports, and start another when it dies.

The writer itself is record_writer.py. Everything it needs is in the journal, so a writer
that dies (killed, out of memory, a bug) loses nothing: the next one is told every live
segment with ``check`` and stores, from the start of each, what the store does not yet
hold. Until it catches up the backlog grows, and past ``max_record_backlog_bytes`` new
requests get a 503, as when the store itself stalls.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

log = logging.getLogger("reef.serve")

RESTART_S = (0.1, 0.5, 2.0, 5.0)  # waits before the next start after quick deaths
QUICK_DEATH_S = 10.0  # a writer that lived shorter than this counts as a quick death


class WriterProcess:
    """One record writer at a time; ``on_report`` gets each report (a dict, see
    record_writer.py) on this class's reader thread."""

    def __init__(
        self,
        store_url: str,
        root: Path,
        on_report: Callable[[dict[str, Any]], None],
        live_segments: Callable[[], list[str]],
    ) -> None:
        self.store_url = store_url
        self.root = root
        self.on_report = on_report
        self.live_segments = live_segments
        self._lock = threading.Lock()  # the child's stdin: spawn and every command
        self._proc: subprocess.Popen[bytes] | None = None
        self.stopping = False
        self._thread = threading.Thread(target=self._run, name="reef-record-writer", daemon=True)
        self.restarts = 0
        # rows written / given up by the writers that ended, plus the current one's
        self._written_before = self._failed_before = 0
        self._written = self._failed = 0

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None else None

    @property
    def written(self) -> int:
        return self._written_before + self._written

    @property
    def failed(self) -> int:
        return self._failed_before + self._failed

    def start(self) -> None:
        self._spawn(check=False)
        self._thread.start()

    def _spawn(self, check: bool) -> None:
        # the writer watches the journal's directory: it must exist before the first segment
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        with self._lock:
            self._written_before += self._written
            self._failed_before += self._failed
            self._written = self._failed = 0
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "reef_cli.server.record_writer",
                    "--journal",
                    self.root,
                    "--parent",
                    str(os.getpid()),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                close_fds=True,
            )
            verb = "check" if check else "seg"
            names = "".join(f"{verb} {name}\n" for name in self.live_segments())
            self._send_locked(f"store {self.store_url}\n{names}")

    def add(self, name: str) -> None:
        """A new segment: the writer tails it from now on."""
        with self._lock:
            self._send_locked(f"seg {name}\n")

    def _send_locked(self, text: str) -> None:
        proc = self._proc
        if not text or proc is None or proc.stdin is None:
            return
        # a dead writer: its successor is told every live segment when it starts
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.write(text.encode())
            proc.stdin.flush()

    def _run(self) -> None:
        quick = 0
        while True:
            proc = self._proc
            assert proc is not None and proc.stdout is not None
            began = time.monotonic()
            self._read(proc.stdout)
            code = proc.wait()
            if self.stopping:
                return
            quick = quick + 1 if time.monotonic() - began < QUICK_DEATH_S else 0
            wait = RESTART_S[min(quick, len(RESTART_S) - 1)]
            log.warning(
                "the record writer (pid %d) ended with code %s; starting another in %gs "
                "(the receipt journal holds every exchange it had not stored)",
                proc.pid,
                code,
                wait,
            )
            time.sleep(wait)
            if self.stopping:
                return
            self.restarts += 1
            self._spawn(check=True)

    def _read(self, out: IO[bytes]) -> None:
        for line in out:
            try:
                report = json.loads(line)
            except ValueError:
                log.error("the record writer said something unexpected: %r", line[:200])
                continue
            self._written = int(report.get("written", 0))
            self._failed = int(report.get("failed", 0))
            try:
                self.on_report(report)
            except Exception:
                log.exception("could not apply the record writer's report")

    def stop(self, timeout: float = 30.0) -> bool:
        """Close the writer's input: it stores what the journal holds and exits. True
        when it did within ``timeout`` (else it is killed; the journal keeps the rest
        for the next start)."""
        self.stopping = True
        with self._lock:
            proc = self._proc
            if proc is not None and proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
        if proc is None:
            return True
        self._thread.join(timeout)
        if self._thread.is_alive() or proc.poll() is None:
            log.error(
                "the record writer did not finish within %gs; stopping it (the receipt "
                "journal keeps what it had not stored for the next start)",
                timeout,
            )
            proc.kill()
            proc.wait()
            self._thread.join(5)
            return False
        return True

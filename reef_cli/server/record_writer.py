"""The record writer: a process apart from ``reef serve`` that turns its receipt journal
into records.

Why a process: building a record (parsing the answer for its usage, assembling a stream,
binding the row) is Python work. On a writer thread it held the serving process's GIL for
about 0.55 ms every 11 ms under load, and the requests that came meanwhile waited for it
(docs/performance.md). The serving process writes every exchange to the receipt journal
anyway, before the client holds its receipt (journal.py); this process tails the journal's
live segments, stores what it reads in batches, fdatasyncs them about once a second and,
after each batch, tells the server how far each segment is stored. The server's only work
per exchange is then the journal's ``os.write``.

Run by writer_process.py as ``python -m reef_cli.server.record_writer --journal DIR
--parent PID``. Its input, one line each: first ``store URL`` (on stdin, never on the
command line or in the environment: it may hold a password), then commands:

- ``seg NAME``: a new segment to tail;
- ``check NAME``: a segment an earlier writer may have partly stored (after a crash of
  that writer): rows already in the store are not written again;
- end of input: store everything the segments hold, then exit. The writer does the same
  when its parent is no longer the server named by ``--parent`` (the server died, and
  something it forked holds the input open).

After each batch one JSON line goes to stdout:
``{"written": W, "failed": F, "segs": [[NAME, OFFSET, CLOSED], ...]}`` — rows written and
given up since start, and per segment the offset up to which every entry is stored and how
many of its exchanges have their final record.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import logging
import os
import select
import signal
import sys
import time
from pathlib import Path
from typing import IO

from reef_cli.core.store import Store
from reef_cli.server import journal
from reef_cli.server.recorder import (
    BATCH_BYTES,
    FINAL_STATES,
    Exchange,
    _Open,
    _weight,
    from_journal,
    started_exchange,
    store_batch,
)

log = logging.getLogger("reef.serve")

# between looks at the segments while exchanges come, so that rows go in batches (and,
# where inotify is missing, how often an idle writer looks)
LINGER_S = 0.01
PARENT_CHECK_S = 1.0  # an idle writer that sleeps on inotify still checks its parent
BATCH_ITEMS = 512


class Tail:
    """One live segment, read from where the last batch ended."""

    def __init__(self, root: Path, name: str, check: bool) -> None:
        self.name = name
        self.fd = os.open(root / name, os.O_RDONLY)
        self.offset = 0  # every entry before this one is in the batch being stored
        self.closed = 0  # exchanges of this segment with their final record stored
        self.open: dict[str, journal.Spans] = {}  # streams begun, not yet ended
        # an earlier writer may have stored entries up to here: check before writing
        self.check_until = os.fstat(self.fd).st_size if check else 0
        self.synced = 0

    def read(self, into: Batch) -> bool:
        """Add whole entries to ``into`` until it is full; True when it filled up
        before the segment's end."""
        for meta, spans, end in journal.entries(self.fd, self.offset):
            start, self.offset = self.offset, end
            rid = meta.get("id")
            kind = journal.add(self.open, meta, spans)
            if kind is None or not isinstance(rid, str):
                continue
            checked = start < self.check_until
            if kind == "S":
                request = journal.read_span(self.fd, self.open[rid].request)
                into.add(self, _Open(started_exchange(self.open[rid].meta, request)), checked)
            elif kind in ("X", "E"):
                into.add(self, from_journal(journal.load(self.fd, self.open.pop(rid))), checked)
            if into.full:
                return True
        return False

    @property
    def gone(self) -> bool:
        """The server removed the file (every exchange stored) and it is read through."""
        try:
            st = os.fstat(self.fd)
        except OSError:
            return True
        return st.st_nlink == 0 and self.offset >= st.st_size

    def sync(self) -> None:
        if self.offset > self.synced:
            self.synced = self.offset
            with contextlib.suppress(OSError):
                os.fdatasync(self.fd)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


class Batch:
    """Exchanges read since the last commit, each with the segment it finishes in."""

    def __init__(self) -> None:
        self.items: list[tuple[Tail, Exchange | _Open, bool]] = []
        self.size = 0

    def add(self, tail: Tail, item: Exchange | _Open, checked: bool) -> None:
        self.items.append((tail, item, checked))
        self.size += _weight(item)

    @property
    def full(self) -> bool:
        return len(self.items) >= BATCH_ITEMS or self.size >= BATCH_BYTES


class Writer:
    def __init__(self, store: Store, root: Path, out: IO[str]) -> None:
        self.store = store
        self.root = root
        self.out = out
        self.tails: dict[str, Tail] = {}
        self.written = 0
        self.failed = 0
        self.last_sync = time.monotonic()

    def command(self, line: str) -> None:
        verb, _, name = line.strip().partition(" ")
        if verb in ("seg", "check") and name and name not in self.tails and "/" not in name:
            try:
                self.tails[name] = Tail(self.root, name, verb == "check")
            except OSError as exc:  # removed before we looked: nothing left to store
                log.debug("segment %s: %s", name, exc)

    def step(self) -> tuple[bool, bool]:
        """Store one batch from the segments: (stored anything, there may be more now)."""
        batch = Batch()
        before = [tail.offset for tail in self.tails.values()]
        for tail in list(self.tails.values()):
            if tail.read(batch):
                break
        if batch.items:
            self._store(batch)
        elif before != [tail.offset for tail in self.tails.values()]:
            self.report()  # only chunks: nothing to store, but a flush waits on the offset
        for name, tail in list(self.tails.items()):
            if tail.gone and not tail.open:
                tail.close()
                del self.tails[name]
        if time.monotonic() - self.last_sync >= journal.SYNC_SECONDS:
            self.sync()
        return bool(batch.items), batch.full

    def _store(self, batch: Batch) -> None:
        checked = [item for _tail, item, was in batch.items if was]
        have = self.store.states([_id(item) for item in checked]) if checked else {}
        todo: list[Exchange | _Open] = []
        stored_before: set[int] = set()  # final rows an earlier writer already stored
        for _tail, item, was in batch.items:
            state = have.get(_id(item)) if was else None
            if state in FINAL_STATES or (state is not None and isinstance(item, _Open)):
                stored_before.add(id(item))
            else:
                todo.append(item)
        stored = store_batch(self.store, todo)
        self.written += stored.written
        self.failed += stored.failed
        finished = stored_before | {id(ex) for ex in stored.finished}
        for tail, item, _was in batch.items:
            if isinstance(item, Exchange) and id(item) in finished:
                tail.closed += 1
        self.report()  # after the commit: what it says is stored is

    def report(self) -> None:
        segs = [[t.name, t.offset, t.closed] for t in self.tails.values()]
        line = json.dumps({"written": self.written, "failed": self.failed, "segs": segs})
        self.out.write(line + "\n")
        self.out.flush()

    def sync(self) -> None:
        self.last_sync = time.monotonic()
        for tail in self.tails.values():
            tail.sync()


def _id(item: Exchange | _Open) -> str:
    return item.ex.id if isinstance(item, _Open) else item.id


def run(writer: Writer, commands: Commands, parent: int, watch: Watch | None = None) -> None:
    """Serve commands and store batches until the input ends or ``parent`` (the server's
    pid) is no longer this process's parent, then drain and return. With ``watch`` an idle
    writer sleeps until the journal is written to; without, it looks every ``LINGER_S``."""
    more = False
    while True:
        if more:
            timeout: float = 0.0
        elif watch is not None:
            timeout = PARENT_CHECK_S
        else:
            timeout = LINGER_S
        lines = commands.read(timeout, watch.fd if watch is not None else None)
        # the server stopped, or died (a process it forked may still hold our input open):
        # store what is there, then go
        if lines is None or os.getppid() != parent:
            while writer.step()[1]:
                pass
            writer.sync()
            writer.report()
            return
        for line in lines:
            writer.command(line)
        if watch is not None:
            watch.drain()
        stored, more = writer.step()
        if stored and not more and watch is not None:
            time.sleep(LINGER_S)  # let a batch gather before the next look


class Watch:
    """inotify on the journal directory: the kernel wakes the writer when the server
    appends, so an idle writer costs nothing and a record lands at once."""

    IN_MODIFY = 0x2
    IN_CREATE = 0x100

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def on(cls, root: Path) -> Watch | None:
        """A watch on ``root``, or None where inotify is not available (then: polling)."""
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            if fd < 0:
                return None
            if libc.inotify_add_watch(fd, os.fsencode(root), cls.IN_MODIFY | cls.IN_CREATE) < 0:
                os.close(fd)
                return None
        except (OSError, AttributeError):
            return None
        return cls(fd)

    def drain(self) -> None:
        """Forget the events so far (what changed is read from the segments themselves)."""
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while os.read(self.fd, 65536):
                pass


class Commands:
    """Lines from the server, read without blocking past a timeout."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._pending = b""

    def read(self, timeout: float, also: int | None = None) -> list[str] | None:
        """The whole lines that came within ``timeout`` seconds (sooner when ``also``, a
        file descriptor, is readable); None once the input has ended."""
        if b"\n" not in self._pending:  # else lines read with the first one are waiting
            fds = [self.fd] if also is None else [self.fd, also]
            ready, _, _ = select.select(fds, [], [], timeout)
            if self.fd not in ready:
                return []
            data = os.read(self.fd, 65536)
            if not data:
                return None
            self._pending += data
        *lines, self._pending = self._pending.split(b"\n")
        return [line.decode("utf-8", "replace") for line in lines]

    def first(self) -> str | None:
        """The first line (blocking); None if the input ends before one."""
        while b"\n" not in self._pending:
            data = os.read(self.fd, 65536)
            if not data:
                return None
            self._pending += data
        line, self._pending = self._pending.split(b"\n", 1)
        return line.decode("utf-8", "replace")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="reef-record-writer", description=__doc__)
    parser.add_argument("--journal", required=True, type=Path)
    parser.add_argument("--parent", type=int, default=None, help="the server's pid")
    args = parser.parse_args(argv)
    # Ctrl-C in a terminal, or a service manager's SIGTERM, reaches the whole group: the
    # server stops this writer itself (it ends when its input does, after a drain)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(format="reef serve (record writer): %(message)s", level=logging.WARNING)
    from reef_cli.core.errors import ReefError
    from reef_cli.core.store import open_store

    commands = Commands(sys.stdin.fileno())
    verb, _, url = (commands.first() or "").partition(" ")
    if verb != "store" or not url:
        print("reef serve (record writer): the first line must be `store URL`", file=sys.stderr)
        return 2
    try:
        store = open_store(url)
    except ReefError as exc:
        print(f"reef serve (record writer): {exc}", file=sys.stderr)
        return 2
    try:
        parent = args.parent if args.parent is not None else os.getppid()
        run(Writer(store, args.journal, sys.stdout), commands, parent, Watch.on(args.journal))
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
--parent PID``,
with the store's URL in ``$REEF_RECORD_WRITER_STORE`` (never on the command line: it may
hold a password). Commands on stdin, one a line:

- ``seg NAME``: a new segment to tail;
- ``check NAME``: a segment an earlier writer may have partly stored (after a crash of
  that writer): rows already in the store are not written again;
- ``poke``: look now (a flush is waiting);
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
    Exchange,
    _Open,
    _weight,
    from_journal,
    started_exchange,
    store_batch,
)
from reef_cli.server.writer_process import STORE_ENV

log = logging.getLogger("reef.serve")

LINGER_S = 0.01  # between batches while exchanges come
IDLE_S = 0.2  # the longest wait when none come (a poke or a command cuts it short)
BATCH_ITEMS = 512
FINAL = ("complete", "interrupted")


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
        for tail in list(self.tails.values()):
            if tail.read(batch):
                break
        if batch.items:
            self._store(batch)
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
            if state in FINAL or (state is not None and isinstance(item, _Open)):
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
        self.report()

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


def run(writer: Writer, commands: int, parent: int) -> None:
    """Serve commands and store batches until the input ends or ``parent`` (the server's
    pid) is no longer this process's parent, then drain and return."""
    pending = b""
    wait = LINGER_S
    while True:
        ready, _, _ = select.select([commands], [], [], wait)
        data = os.read(commands, 65536) if ready else None
        # the server stopped, or died (a process it forked may still hold our input open):
        # store what is there, then go
        if data == b"" or os.getppid() != parent:
            while writer.step()[1]:
                pass
            writer.sync()
            writer.report()
            return
        if data:
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                writer.command(line.decode("utf-8", "replace"))
        stored, more = writer.step()
        # busy: straight on, or a short linger so that rows go in batches; idle: back off
        wait = 0.0 if more else LINGER_S if stored else min(IDLE_S, max(LINGER_S, wait * 2))


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

    try:
        store = open_store(os.environ.get(STORE_ENV) or None)
    except ReefError as exc:
        print(f"reef serve (record writer): {exc}", file=sys.stderr)
        return 2
    try:
        parent = args.parent if args.parent is not None else os.getppid()
        run(Writer(store, args.journal, sys.stdout), sys.stdin.fileno(), parent)
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

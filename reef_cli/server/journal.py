"""The receipt journal: what a client was sent, on disk before it is sent.

Records reach SQLite from a writer thread, in batches, after the answer has gone out. A
crash in between (SIGKILL, OOM, power) would leave a receipt the client holds with no
record. So the response path first appends the exchange to this journal — one
``os.write`` to an ``O_APPEND`` file, no fsync on the request path — and ``reef serve``
replays the journals of dead processes when it starts (a segment at a time, indexed by
offsets, each exchange read only when it is written: replay holds about one exchange,
however much a crash left behind):

- a whole non-stream exchange (``X``: request and the answer about to be sent) -> a
  ``complete`` record;
- a stream: ``S`` (the request) before the headers go out, ``C`` for every chunk before
  it is sent, ``E`` (status) before the last bytes -> ``complete`` when ``E`` is there,
  else ``interrupted`` with the chunks that were sent.

A write that reached the kernel survives the death of the process; the record writer
fdatasyncs the open segment about once a second, so a power cut loses at most about a
second of receipts (SQLite itself runs with ``synchronous=NORMAL``, the same bound).

The journal is also how records reach the store: ``reef serve``'s record writer process
(record_writer.py) tails the live segments with :func:`entries` and stores what it reads,
so the serving process's only work per exchange is the ``os.write``.

Segments: ``<state>/records-journal/<ns>-<pid>-<n>.seg``, each held under an exclusive
``flock`` by the process writing it (the lock dies with it), so replay only touches the
segments of dead processes, never those of a live ``reef serve`` or trial gateway
sharing the state dir. A segment is removed once every exchange it holds is in SQLite;
a new one starts past ``SEGMENT_BYTES``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reef_cli.core.compact_json import ascii_compact
from reef_cli.core.store.base import JOURNAL_DIR_NAME

log = logging.getLogger("reef.serve")

DIR_NAME = JOURNAL_DIR_NAME
SUFFIX = ".seg"
SEGMENT_BYTES = 4 * 1024 * 1024
SYNC_SECONDS = 1.0
_MARK = b"\x1erj "  # entry: MARK + header length + " " + header JSON + payloads


class Segment:
    """One journal file. ``opened`` is only counted up by the response path and
    ``closed`` and ``processed`` only set by the recorder's writer (thread, or the thread
    that reads the writer process's reports), so none needs a lock."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd
        self.size = 0
        self.opened = 0  # exchanges begun in this segment
        self.closed = 0  # of those, how many have their final record in SQLite
        self.processed = 0  # bytes the writer process has read and stored (process mode)
        self.retired = False  # no longer the one new exchanges go to
        self.removed = False
        self.unsynced = False

    @property
    def done(self) -> bool:
        return self.retired and self.closed >= self.opened


def _header(meta: dict[str, Any], sizes: list[int]) -> bytes:
    head = ascii_compact({**meta, "n": sizes}).encode()
    return _MARK + str(len(head)).encode() + b" " + head


class Journal:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._seq = 0
        self._lock = threading.Lock()  # rotation and removal (rare)
        self._segments: list[Segment] = []
        self._current: Segment | None = None
        self.broken = False  # a write failed: records still flow, without the journal
        self.last_sync = time.monotonic()
        self.appended = 0  # bytes written by this process (the writer process's backlog)
        self.on_segment: Callable[[Segment], None] | None = None  # a new segment began

    # ------------------------------------------------------------ writing (response path)

    def _new_segment(self) -> Segment:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._seq += 1
        name = f"{time.time_ns()}-{os.getpid()}-{self._seq}"
        tmp = self.root / f".{name}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)  # held until this process ends or removes it
        final = self.root / (name + SUFFIX)
        os.rename(tmp, final)  # only locked segments carry the name replay looks for
        seg = Segment(final, fd)
        self._segments.append(seg)
        return seg

    def current(self) -> Segment | None:
        seg = self._current
        if seg is not None and seg.size < SEGMENT_BYTES:
            return seg
        if self.broken:
            return None
        with self._lock:
            try:
                fresh = self._new_segment()
            except OSError as exc:
                self._fail(exc)
                return None
            if seg is not None:
                seg.retired = True
            self._current = fresh
            if self.on_segment is not None:
                self.on_segment(fresh)
            return fresh

    def live(self) -> list[Segment]:
        """The segments not yet removed, oldest first."""
        with self._lock:
            return list(self._segments)

    def begin(self, seg: Segment) -> None:
        seg.opened += 1

    def append(self, seg: Segment | None, meta: dict[str, Any], *payloads: bytes) -> bool:
        """Write one entry; False when it is not in the journal (no segment, or the
        write failed): the caller then hands the exchange over some other way."""
        if seg is None or seg.removed:
            return False
        return self._write(seg, b"".join((_header(meta, [len(p) for p in payloads]), *payloads)))

    def append_chunk(self, seg: Segment | None, record_id: str, chunk: bytes) -> bool:
        if seg is None or seg.removed:
            return False
        head = b'{"k":"C","id":"%s","n":[%d]}' % (record_id.encode(), len(chunk))
        return self._write(seg, _MARK + str(len(head)).encode() + b" " + head + chunk)

    def _write(self, seg: Segment, data: bytes) -> bool:
        if self.broken:
            return False
        try:
            written = os.write(seg.fd, data)  # O_APPEND: one write is one whole entry
        except OSError as exc:
            self._fail(exc)
            return False
        seg.size += written
        self.appended += written
        seg.unsynced = True
        if written != len(data):  # a full disk cuts a write short: that entry is torn
            self._fail(OSError(f"wrote {written} of {len(data)} bytes"))
            return False
        return True

    def _fail(self, exc: OSError) -> None:
        if not self.broken:
            log.error(
                "the receipt journal in %s cannot be written (%s): records still go to "
                "SQLite, but a crash now may lose the last ones",
                self.root,
                exc.strerror or exc,
            )
        self.broken = True

    # ------------------------------------------------------------ writer thread

    def finished(self, seg: Segment | None) -> None:
        """The final record of one exchange of ``seg`` is in SQLite."""
        if seg is not None:
            seg.closed += 1

    def maintain(self, force_sync: bool = False, sync: bool = True) -> None:
        """fdatasync the segments with unsynced writes (about once a second; not with
        ``sync=False``: the writer process syncs what it reads), remove the retired
        segments whose exchanges are all stored. The recorder's writer only."""
        now = time.monotonic()
        if sync and (force_sync or now - self.last_sync >= SYNC_SECONDS):
            self.last_sync = now
            for seg in list(self._segments):
                if seg.unsynced and not seg.removed:
                    seg.unsynced = False
                    with contextlib.suppress(OSError):
                        os.fdatasync(seg.fd)
        for seg in list(self._segments):
            if seg.done:
                self._remove(seg)

    def _remove(self, seg: Segment) -> None:
        with self._lock:
            if seg.removed:
                return
            seg.removed = True
            with contextlib.suppress(OSError):
                seg.path.unlink()
            with contextlib.suppress(OSError):
                os.close(seg.fd)
            self._segments.remove(seg)

    def close(self) -> None:
        """At shutdown, after every record is stored: remove what is done."""
        if self._current is not None:
            self._current.retired = True
        for seg in list(self._segments):
            if seg.done:
                self._remove(seg)
            else:  # records that could not be stored: leave them for the next start
                with contextlib.suppress(OSError):
                    os.fdatasync(seg.fd)


# ------------------------------------------------------------ replay (at start)


@dataclass
class Replayed:
    """One exchange as the journal tells it."""

    meta: dict[str, Any]
    request: bytes = b""
    body: bytes | None = None
    chunks: list[bytes] = field(default_factory=list)
    end: dict[str, Any] | None = None


@dataclass
class Spans:
    """Where one exchange's parts lie in a dead segment: (offset, length) pairs, so an
    index of the whole segment holds no request or answer in memory."""

    meta: dict[str, Any]
    request: tuple[int, int] = (0, 0)
    body: tuple[int, int] | None = None
    chunks: list[tuple[int, int]] = field(default_factory=list)
    end: dict[str, Any] | None = None


WINDOW = 256 * 1024  # how much of a segment is read at a time for its headers


class _Reader:
    """Random reads of a segment through one small window (``os.pread``: no file offset
    is shared, and a payload that is skipped is never read)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.size = os.fstat(fd).st_size
        self._buf = b""
        self._at = 0

    def get(self, at: int, n: int) -> bytes:
        """Up to ``n`` bytes from offset ``at`` (fewer at the end of the file)."""
        end = min(at + n, self.size)
        if at < self._at or end > self._at + len(self._buf):
            self._buf = os.pread(self.fd, max(end - at, WINDOW), at)
            self._at = at
        return self._buf[at - self._at : end - self._at]


def entries(fd: int, start: int = 0) -> Iterator[tuple[dict[str, Any], list[tuple[int, int]], int]]:
    """Whole entries of a segment from offset ``start`` as (header, payload spans, the
    offset after the entry); a torn last entry (a write cut short, or one still being
    written) ends it. Payloads are not read."""
    reader = _Reader(fd)
    pos = start
    while pos < reader.size:
        head = reader.get(pos, len(_MARK) + 24)
        if head[: len(_MARK)] != _MARK:
            return
        space = head.find(b" ", len(_MARK))
        if space < 0:
            return
        try:
            hlen = int(head[len(_MARK) : space])
            if hlen < 0:
                return
            meta = json.loads(reader.get(pos + space + 1, hlen))
            sizes = [int(n) for n in meta.pop("n")]
        except (ValueError, KeyError, TypeError, AttributeError):
            return
        cursor = pos + space + 1 + hlen
        if any(n < 0 for n in sizes) or cursor + sum(sizes) > reader.size:
            return
        spans = []
        for n in sizes:
            spans.append((cursor, n))
            cursor += n
        yield meta, spans, cursor
        pos = cursor


def index(fd: int) -> dict[str, Spans]:
    """Every exchange in one segment, by receipt, as spans. An exchange's entries all go
    to the segment it began in, so a segment is replayed on its own."""
    found: dict[str, Spans] = {}
    for meta, spans, _end in entries(fd):
        add(found, meta, spans)
    return found


def add(found: dict[str, Spans], meta: dict[str, Any], spans: list[tuple[int, int]]) -> str | None:
    """Fold one entry into ``found``; the kind of entry it was (``X``, ``S``, ``C``,
    ``E``), or None for one that does not fit (no receipt, or a part of an exchange
    whose start is not in ``found``)."""
    kind = meta.pop("k", None)
    rid = meta.get("id")
    if not isinstance(rid, str):
        return None
    if kind == "X" and len(spans) == 2:
        found[rid] = Spans(meta, spans[0], spans[1])
    elif kind == "S" and spans:
        found[rid] = Spans(meta, spans[0])
    elif kind == "C" and rid in found and spans:
        found[rid].chunks.append(spans[0])
    elif kind == "E" and rid in found:
        found[rid].end = meta
    else:
        return None
    return str(kind)


def read_span(fd: int, span: tuple[int, int]) -> bytes:
    at, n = span
    data = os.pread(fd, n, at)
    if len(data) != n:
        raise OSError(f"the segment ended {n - len(data)} byte(s) early")
    return data


def load(fd: int, spans: Spans) -> Replayed:
    """One exchange with its payloads read from the segment."""
    return Replayed(
        spans.meta,
        read_span(fd, spans.request),
        None if spans.body is None else read_span(fd, spans.body),
        [read_span(fd, span) for span in spans.chunks],
        spans.end,
    )


def claim_dead_segments(root: Path) -> list[tuple[Path, int]]:
    """Segments whose writer has died, oldest first, each locked (path, fd)."""
    if not root.is_dir():
        return []
    out = []
    for path in sorted(root.glob("*" + SUFFIX)):
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a live process holds it
            os.close(fd)
            continue
        out.append((path, fd))
    return out


def release(paths: list[tuple[Path, int]]) -> None:
    """Remove replayed segments (their records are stored) and drop the locks."""
    for path, fd in paths:
        with contextlib.suppress(OSError):
            path.unlink()
        with contextlib.suppress(OSError):
            os.close(fd)

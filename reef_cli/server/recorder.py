"""The recorder: every exchange becomes a record, written off the response path.

The response path appends bytes and writes the receipt journal (journal.py: one
``os.write`` before the client is sent anything it could hold a receipt from). Who turns
the journal into records is the recorder's ``writer``:

- ``process`` (``reef serve``'s default): a record writer process tails the journal and
  stores it (record_writer.py, started and restarted by writer_process.py); the serving
  process does nothing more per exchange, so no record building takes its GIL;
- ``thread``: the exchange also goes on a queue, and a writer thread in this process
  parses, assembles streams and inserts, batched (in-process trial gateways, tests, and
  the fallback whenever an exchange could not be journaled).

Either way one row per exchange; a stream also gets a ``streaming`` row as soon as it
begins, so its receipt resolves (and can be reported on) while it runs. ``start`` replays
the journals of processes that died, so every receipt a client received resolves to a
record after any crash: ``complete``, or ``interrupted`` with what had been sent.
``flush`` waits until everything submitted before the call is stored; ``stop`` flushes.

The backlog is weighed in bytes (``backlog_bytes``: the requests and answers queued or
being written, and the journal bytes the writer process has not stored yet). When the
store falls behind (a slow disk, a locked SQLite file, PostgreSQL away, a writer process
restarting) the proxy stops admitting new inference requests once the backlog reaches
``max_backlog_bytes`` (``full``; a 503 with Retry-After, RecordBacklogFull) instead of
letting it take the server's memory or disk. Nothing already admitted is ever dropped:
requests in flight finish, are journaled and stored past the bound (so the backlog may
exceed it by what those carry), and every receipt handed out still resolves to a record.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import queue
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reef_cli.core.compact_json import ascii_compact
from reef_cli.core.errors import ServeError
from reef_cli.core.records import RawJSON, Record, now_iso
from reef_cli.core.store import Store
from reef_cli.server import assemble, journal
from reef_cli.server.writer_process import WriterProcess

log = logging.getLogger("reef.serve")
_SESSION_IN_USER_ID = re.compile(r"session_([0-9A-Za-z-]{8,64})")


# each client dialect's inference route (app.py's fast path; metrics and traces name them)
ROUTES = {
    "openai": "/v1/chat/completions",
    "anthropic": "/v1/messages",
    "responses": "/v1/responses",
    "embeddings": "/v1/embeddings",
}


@dataclass
class Exchange:
    """What the response path collects about one request (cheap to fill)."""

    id: str
    scenario: str
    release_id: int | None
    client_dialect: str
    upstream_dialect: str
    request: bytes | dict[str, Any]
    session_header: str | None = None
    stream: bool = False
    chunks: list[bytes] = field(default_factory=list)
    body: bytes | dict[str, Any] | None = None
    status: int | None = None
    error: str | None = None
    started: float = field(default_factory=time.perf_counter)
    first_chunk: float | None = None
    ended: float | None = None
    created_at: str = field(default_factory=now_iso)
    submitted: bool = False
    served_release_id: int | None = None
    release_note: str | None = None
    request_json: Any = None  # the request as the proxy already parsed it (saves a parse)
    segment: journal.Segment | None = field(default=None, repr=False)
    interrupted: bool = False  # rebuilt from the journal of a process that died mid-way
    weight_version: str | None = None  # reefd: the weights served when the request came
    weight_note: str | None = None  # reefd: why this exchange cannot train (a swap, ...)
    weight_epoch: int | None = None  # reefd: WeightVersion.epoch when the request came
    usage: dict[str, Any] | None = None  # a translated stream's usage, the client's dialect
    tags: dict[str, str] | None = None  # the request's x-reef-tag-<name> headers
    upstream_started: float | None = None  # traces on: when the upstream call began
    traceparent: str | None = None  # traces on: the client's W3C trace context header


@dataclass
class _Open:
    """Queue item: a stream has begun; store its ``streaming`` row."""

    ex: Exchange


def _meta(ex: Exchange, kind: str) -> dict[str, Any]:
    return {
        "k": kind,
        "id": ex.id,
        "scenario": ex.scenario,
        "release_id": ex.release_id,
        "served_release_id": ex.served_release_id,
        "release_note": ex.release_note,
        "weight_version": ex.weight_version,
        "weight_note": ex.weight_note,
        "client_dialect": ex.client_dialect,
        "upstream_dialect": ex.upstream_dialect,
        "session_header": ex.session_header,
        "created_at": ex.created_at,
        "started": ex.started,
        "stream": ex.stream,
        "tags": ex.tags,
    }


def _end(ex: Exchange, kind: str) -> dict[str, Any]:
    return {
        "k": kind,
        "id": ex.id,
        "status": ex.status,
        "error": ex.error,
        "first_chunk": ex.first_chunk,
        "ended": ex.ended,
        "weight_note": ex.weight_note,
        "usage": ex.usage,
    }


def _bytes(data: bytes | dict[str, Any] | None) -> bytes:
    if data is None:
        return b""
    if isinstance(data, bytes):
        return data
    return ascii_compact(data).encode()


def session_of(header: str | None, request: Any) -> str | None:
    if header:
        return header[:200]
    if not isinstance(request, dict):
        return None
    meta = request.get("metadata")
    if isinstance(meta, dict):
        for key in ("session_id", "reef_session"):
            if isinstance(meta.get(key), str):
                return meta[key][:200]
        user_id = meta.get("user_id")
        if isinstance(user_id, str):
            try:
                parsed = json.loads(user_id)
                if isinstance(parsed, dict) and isinstance(parsed.get("session_id"), str):
                    return parsed["session_id"][:200]
            except ValueError:
                pass
            match = _SESSION_IN_USER_ID.search(user_id)
            if match:
                return match.group(1)
    return None


def _json(data: bytes | dict[str, Any] | None) -> Any:
    if data is None or isinstance(data, dict):
        return data
    try:
        return json.loads(data)
    except ValueError:
        return {"_raw": data[:65536].decode("utf-8", "replace")}


def _raw(data: bytes | dict[str, Any] | None, parsed: Any) -> Any:
    """Store JSON bytes as they came (no re-encoding) when they parsed as JSON."""
    if isinstance(data, bytes) and not (isinstance(parsed, dict) and "_raw" in parsed):
        try:
            return RawJSON(data.decode("utf-8"))
        except UnicodeDecodeError:
            return parsed
    return parsed


def _request(ex: Exchange) -> Any:
    if isinstance(ex.request_json, dict) and isinstance(ex.request, bytes):
        return ex.request_json
    return _json(ex.request)


def _about(ex: Exchange, request: Any) -> dict[str, Any]:
    """The fields every row of ``ex`` has, whatever its state."""
    model = request.get("model") if isinstance(request, dict) else None
    return {
        "id": ex.id,
        "scenario": ex.scenario,
        "release_id": ex.release_id,
        "session_id": session_of(ex.session_header, request),
        "client_dialect": ex.client_dialect,
        "upstream_dialect": ex.upstream_dialect,
        "model": model if isinstance(model, str) else None,
        "request": _raw(ex.request, request),
        "created_at": ex.created_at,
        "served_release_id": ex.served_release_id,
        "release_note": ex.release_note,
        "weight_version": ex.weight_version,
        "weight_note": ex.weight_note,
        "tags": ex.tags,
    }


def open_record(ex: Exchange) -> Record:
    """The ``streaming`` row of a stream that has begun: no response yet."""
    return Record(**_about(ex, _request(ex)), stream=True, state="streaming")


STREAM_ASSEMBLERS = {
    "openai": assemble.openai_stream,
    "anthropic": assemble.anthropic_stream,
    "responses": assemble.responses_stream,
}


def to_record(ex: Exchange) -> Record:
    request = _request(ex)
    if ex.stream and ex.chunks:
        raw = b"".join(ex.chunks)
        response: Any = STREAM_ASSEMBLERS.get(ex.client_dialect, assemble.openai_stream)(raw)
        stored_response = response
    else:
        response = _json(ex.body)
        stored_response = _raw(ex.body, response)
    usage, inp, out = assemble.usage_of(ex.client_dialect, response)
    if usage is None and ex.usage:  # a translated stream the client took without usage
        usage, inp, out = assemble.usage_of(ex.client_dialect, {"usage": ex.usage})
    token_ids, logprobs = (None, None) if ex.stream else assemble.tokens_of(response)
    ended = ex.ended or time.perf_counter()
    return Record(
        **_about(ex, request),
        stream=ex.stream,
        response=stored_response,
        usage=usage,
        input_tokens=inp if isinstance(inp, int) else None,
        output_tokens=out if isinstance(out, int) else None,
        latency_ms=round((ended - ex.started) * 1000, 3),
        first_chunk_ms=None
        if ex.first_chunk is None
        else round((ex.first_chunk - ex.started) * 1000, 3),
        status=ex.status,
        error=ex.error,
        state="interrupted" if ex.interrupted else "complete",
        token_ids=token_ids,
        logprobs=logprobs,
    )


def started_exchange(m: dict[str, Any], request: bytes) -> Exchange:
    """An exchange as its journal entry (``X`` or ``S``) began it: no answer yet."""
    return Exchange(
        id=m["id"],
        scenario=m["scenario"],
        release_id=m.get("release_id"),
        client_dialect=m["client_dialect"],
        upstream_dialect=m["upstream_dialect"],
        request=request,
        session_header=m.get("session_header"),
        stream=bool(m.get("stream")),
        started=float(m.get("started") or 0.0),
        created_at=m.get("created_at") or now_iso(),
        served_release_id=m.get("served_release_id"),
        release_note=m.get("release_note"),
        weight_version=m.get("weight_version"),
        weight_note=m.get("weight_note"),
        tags=m.get("tags"),
    )


def from_journal(item: journal.Replayed) -> Exchange:
    """The exchange a journal tells whole (``X``, or ``S`` with its chunks and ``E``); a
    stream without ``E`` is ``interrupted`` with the chunks that were sent."""
    m = item.meta
    ex = started_exchange(m, item.request)
    end = m if item.body is not None else item.end
    if item.body is not None:
        ex.body = item.body
    ex.chunks = item.chunks
    if end is not None:
        ex.status = end.get("status")
        ex.error = end.get("error")
        ex.first_chunk = end.get("first_chunk")
        ex.ended = end.get("ended")
        ex.weight_note = end.get("weight_note", ex.weight_note)
        ex.usage = end.get("usage")
    else:  # a stream cut off by the crash
        ex.interrupted = True
        ex.first_chunk = None
        ex.error = (
            "interrupted: reef serve stopped before this stream ended; the response holds "
            f"the {len(item.chunks)} chunk(s) that had been sent"
        )
    return ex


BATCH_BYTES = 32 * 1024 * 1024
# a row in one of these states needs nothing more from the journal (replay and the writer
# process after a crash both skip it)
FINAL_STATES = ("complete", "interrupted")
REPLAY_BATCH_BYTES = 256 * 1024  # replay writes batches this large (or one exchange)
MAX_BACKLOG_BYTES = 256 * 1024 * 1024  # serve.yaml max_record_backlog_bytes
RETRY_AFTER_S = 5  # what a refused caller is told to wait


def _mib(size: int) -> str:
    return f"{round(size / (1024 * 1024), 1):g}"


class RecordBacklogFull(ServeError):
    """The records store has fallen so far behind that the bytes waiting for it reached
    ``max_record_backlog_bytes``: new inference requests get a 503 with Retry-After (their
    caller retries; nothing is recorded or sent upstream) rather than the queue growing
    without bound. Back-pressure, not dropping: every exchange already admitted is kept."""

    def __init__(self, backlog: int, limit: int) -> None:
        super().__init__(
            f"reef serve is not taking new requests: {_mib(backlog)} MiB of exchanges wait "
            f"for the records store (max_record_backlog_bytes: {_mib(limit)} MiB)",
            "check the records store: `reef doctor`; retry after the Retry-After seconds",
        )


def _weight(item: Exchange | _Open | None) -> int:
    """The bytes a queued item brings into a batch (its request and answer)."""
    if item is None:
        return 0
    ex = item.ex if isinstance(item, _Open) else item
    size = len(ex.request) if isinstance(ex.request, bytes) else 0
    if isinstance(item, Exchange):
        size += len(ex.body) if isinstance(ex.body, bytes) else 0
        size += sum(len(chunk) for chunk in ex.chunks)
    return size


class Recorder:
    def __init__(
        self,
        store: Store,
        batch: int = 512,
        linger: float = 0.01,
        journal_dir: Path | None = None,
        durable: bool = True,
        max_backlog_bytes: int = MAX_BACKLOG_BYTES,
        writer: str = "thread",
    ) -> None:
        self.store = store
        self.batch = batch
        self.linger = linger  # wait this long after the first item, to write in batches
        self.max_backlog_bytes = max_backlog_bytes
        # (sequence, item, its weight); the weights in and out are counted apart, each by
        # one side, so reading the backlog is two loads and a subtraction, never a lock
        self._queue: queue.Queue[tuple[int, Exchange | _Open | None, int]] = queue.Queue()
        self._put_lock = threading.Lock()  # producers: the event loop, trial gateways
        self._bytes_in = 0  # weight of everything queued (producers, under _put_lock)
        self._bytes_out = 0  # weight of everything written or given up (writer thread)
        self._thread = threading.Thread(target=self._run, name="reef-recorder", daemon=True)
        self._stopped = False
        self._seq = itertools.count(1)
        self._queued_seq = 0  # the last sequence number handed out
        self._done_seq = 0  # every item up to this one has been processed
        root = journal_dir if journal_dir is not None else store.journal_dir
        self.journal: journal.Journal | None = journal.Journal(root) if durable else None
        self.written = 0  # rows the writer thread stored (the process's: writer_written)
        self.failed = 0
        self.replayed = 0
        self.process: WriterProcess | None = None
        self._journal_done = 0  # journal bytes the writer process has stored
        url = store.reopen_url()
        if writer == "process" and self.journal is not None and url is not None:
            process = self.process = WriterProcess(url, root, self._reported, self._live_names)
            self.journal.on_segment = lambda seg: process.add(seg.path.name)
        elif writer not in ("process", "thread"):
            raise ValueError(f"unknown record writer {writer!r}: process or thread")

    def start(self) -> None:
        if self.journal is not None:
            self.replay()
        self._thread.start()
        if self.process is not None:
            self.process.start()

    # ------------------------------------------------------------ the writer process

    def _live_names(self) -> list[str]:
        return [seg.path.name for seg in self.journal.live()] if self.journal else []

    def _reported(self, report: dict[str, Any]) -> None:
        """The writer process stored a batch: move each segment's marks, remove the
        segments it finished (the reader thread of writer_process.py)."""
        assert self.journal is not None
        live = {seg.path.name: seg for seg in self.journal.live()}
        for name, offset, closed in report.get("segs", []):
            seg = live.get(name)
            if seg is None:
                continue
            if offset > seg.processed:
                self._journal_done += offset - seg.processed
                seg.processed = offset
            seg.closed = closed
        self.journal.maintain(sync=False)  # the writer process fdatasyncs what it reads

    @property
    def _by_process(self) -> bool:
        """Journaled exchanges are the writer process's to store (not once it is told
        to stop: what comes after goes to the thread)."""
        return self.process is not None and not self.process.stopping

    @property
    def writer_written(self) -> int:
        """Rows stored, by whichever writer."""
        return self.written + (self.process.written if self.process else 0)

    @property
    def writer_failed(self) -> int:
        return self.failed + (self.process.failed if self.process else 0)

    # ------------------------------------------------------------ response path

    def open_stream(self, ex: Exchange) -> None:
        """A stream is about to send its headers: journal its start, queue its
        ``streaming`` row (so the receipt resolves from the first byte)."""
        ex.stream = True
        j = self.journal
        if j is not None:
            seg = ex.segment = j.current()
            if seg is not None:
                j.begin(seg)
                if j.append(seg, _meta(ex, "S"), _bytes(ex.request)) and self._by_process:
                    return  # the writer process reads it from there
        self._put(_Open(ex))

    def chunk(self, ex: Exchange, data: bytes) -> None:
        """A stream chunk about to be sent."""
        ex.chunks.append(data)  # kept: the writer thread may have to assemble the stream
        if ex.segment is not None and self.journal is not None:
            self.journal.append_chunk(ex.segment, ex.id, data)

    def submit(self, exchange: Exchange) -> None:
        """The exchange is finished (its last bytes are about to be sent): journal it,
        queue it for writing; a second submit of the same exchange is a no-op."""
        if exchange.submitted:
            return
        exchange.submitted = True
        if exchange.ended is None:
            exchange.ended = time.perf_counter()
        if self._stopped and not self._thread.is_alive():
            self._write([exchange])  # late arrival after shutdown: store it right here
            return
        j = self.journal
        journaled = False
        if j is not None:
            if exchange.segment is not None:  # a stream: its start and chunks are there
                journaled = j.append(exchange.segment, _end(exchange, "E"))
            else:
                seg = exchange.segment = j.current()
                if seg is not None:
                    j.begin(seg)
                    meta = {**_meta(exchange, "X"), **_end(exchange, "X")}
                    journaled = j.append(seg, meta, _bytes(exchange.request), _bytes(exchange.body))
        if not (journaled and self._by_process):  # else the writer process reads it there
            self._put(exchange)

    def _put(self, item: Exchange | _Open) -> None:
        weight = _weight(item)
        with self._put_lock:
            seq = next(self._seq)
            self._queued_seq = seq
            self._bytes_in += weight
            self._queue.put((seq, item, weight))

    @property
    def pending(self) -> int:
        """Exchanges begun whose final record is not stored yet."""
        queued = self._queue.unfinished_tasks
        if self.process is None or self.journal is None:
            return queued
        return queued + sum(max(0, s.opened - s.closed) for s in self.journal.live())

    @property
    def backlog_bytes(self) -> int:
        """Bytes of requests and answers queued or being written, not yet stored."""
        return self._bytes_in - self._bytes_out + self._journal_backlog()

    def _journal_backlog(self) -> int:
        j = self.journal
        return j.appended - self._journal_done if j is not None and self.process else 0

    @property
    def full(self) -> bool:
        """The backlog reached its bound: refuse new requests (O(1), on the hot path)."""
        return self.backlog_bytes >= self.max_backlog_bytes

    def refusal(self) -> RecordBacklogFull:
        return RecordBacklogFull(self.backlog_bytes, self.max_backlog_bytes)

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every exchange queued before this call is stored (or ``timeout``
        passes). Items queued meanwhile do not hold it up."""
        target = self._queued_seq
        marks = [(s, s.size) for s in self.journal.live()] if self.process and self.journal else []
        deadline = time.monotonic() + timeout
        while self._done_seq < target:
            if time.monotonic() >= deadline or not self._thread.is_alive():
                return self._done_seq >= target
            time.sleep(0.002)
        while not all(seg.removed or seg.processed >= size for seg, size in marks):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.002)
        return True

    def stop(self, timeout: float = 30.0) -> None:
        if self._stopped:
            return
        if self.process is not None:  # first: it drains the journal into the store
            self.process.stop(timeout)
        self._stopped = True
        if not self._thread.is_alive():
            return
        self._queue.put((0, None, 0))
        self._thread.join(timeout)

    # ------------------------------------------------------------ replay

    def replay(self) -> int:
        """Store what the journals of dead processes hold and the store lacks."""
        assert self.journal is not None
        stored = interrupted = 0
        for path, fd in journal.claim_dead_segments(self.journal.root):
            done, count, cut = self._replay_segment(path, fd)
            stored += count
            interrupted += cut
            if done:
                journal.release([(path, fd)])  # stored: the segment has done its work
            else:  # keep it for the next start
                os.close(fd)
        self.replayed = stored
        if stored:
            log.warning(
                "recovered %d record(s) from the receipt journal of a server that stopped "
                "without flushing (%d interrupted mid-stream)",
                stored,
                interrupted,
            )
        return stored

    def _replay_segment(self, path: Path, fd: int) -> tuple[bool, int, int]:
        """One dead segment: (all stored, exchanges replayed, of those interrupted).

        Streamed, not read whole: a crash after a heavy burst may leave gigabytes of
        journal, and the next start must not hold them at once. The segment is indexed
        by offsets (headers only); then each missing exchange is read, queued for a batch
        of at most ``REPLAY_BATCH_BYTES`` (or one exchange), written and let go."""
        try:
            spans = journal.index(fd)
        except OSError as exc:
            log.error("cannot read receipt journal %s: %s", path, exc)
            return False, 0, 0
        before = self.failed
        count = cut = 0
        ids = list(spans)
        for start in range(0, len(ids), self.batch):
            part = ids[start : start + self.batch]
            have = self.store.states(part)
            pending: list[Exchange] = []
            size = 0
            for rid in part:
                if have.get(rid) in FINAL_STATES:
                    continue
                try:
                    ex = from_journal(journal.load(fd, spans[rid]))
                except OSError as exc:
                    log.error("cannot read record %s from %s: %s", rid, path, exc)
                    self.failed += 1
                    continue
                count += 1
                cut += ex.interrupted
                pending.append(ex)
                size += _weight(ex)
                del ex
                if size >= REPLAY_BATCH_BYTES:
                    self._write(pending, journaled=False)
                    pending, size = [], 0
            self._write(pending, journaled=False)
            del pending
        return self.failed == before, count, cut

    # ------------------------------------------------------------ writer thread

    def _run(self) -> None:
        wait = journal.SYNC_SECONDS if self.journal is not None else None
        while True:
            try:
                first = self._queue.get(timeout=wait)
            except queue.Empty:
                if self.journal is not None:
                    self.journal.maintain(sync=self.process is None)
                continue
            if first[1] is not None and self.linger:
                time.sleep(self.linger)  # releases the GIL; one commit for many records
            items = [first]
            size = first[2]
            while len(items) < self.batch and size < BATCH_BYTES:  # many, or large: write
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
                size += items[-1][2]
            work = [item for _seq, item, _w in items if item is not None]
            try:
                self._write(work)
            finally:
                for seq, _item, _w in items:
                    if seq:
                        self._done_seq = seq
                    self._queue.task_done()
                self._bytes_out += size  # stored (or counted failed): off the backlog
            if self.journal is not None:
                self.journal.maintain(sync=self.process is None)
            stopping = any(item is None for _seq, item, _w in items)
            del first, items, work  # the batch's answers go now, not when the next one comes
            if stopping:
                # drain whatever arrived after the stop marker
                rest: list[Exchange | _Open] = []
                last = 0
                weight = 0
                while True:
                    try:
                        seq, extra, w = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if extra is not None:
                        rest.append(extra)
                    last = max(last, seq)
                    weight += w
                    self._queue.task_done()
                self._write(rest)
                self._bytes_out += weight
                if last:
                    self._done_seq = last
                if self.journal is not None:
                    self.journal.close()
                self.store.release_thread()
                return

    def _write(
        self, items: list[Exchange | _Open] | list[Exchange], journaled: bool = True
    ) -> None:
        stored = store_batch(self.store, items)
        self.written += stored.written
        self.failed += stored.failed
        j = self.journal if journaled else None
        if j is not None:
            for ex in stored.finished:
                j.finished(ex.segment)


@dataclass
class Stored:
    """What :func:`store_batch` did: rows written, rows given up, and the exchanges
    whose final record is now stored (a ``streaming`` row finishes none)."""

    written: int = 0
    failed: int = 0
    finished: list[Exchange] = field(default_factory=list)


def _bare_record(ex: Exchange) -> Record:
    """The record of an exchange whose answer could not be assembled (a bug there must
    not lose the receipt)."""
    return Record(
        id=ex.id,
        scenario=ex.scenario,
        client_dialect=ex.client_dialect,
        upstream_dialect=ex.upstream_dialect,
        release_id=ex.release_id,
        status=ex.status,
        error=(ex.error or "") + " (response could not be assembled)",
        created_at=ex.created_at,
        state="interrupted" if ex.interrupted else "complete",
        served_release_id=ex.served_release_id,
        release_note=ex.release_note,
    )


def store_batch(store: Store, items: Sequence[Exchange | _Open]) -> Stored:
    """Build the rows of ``items`` and store them in one transaction; when that fails,
    one by one with three tries each. Used by the writer thread and the writer process."""
    out = Stored()
    if not items:
        return out
    records: list[Record] = []
    finals: list[Exchange | None] = []  # per record: the exchange it finishes
    for item in items:
        if isinstance(item, _Open):
            try:
                records.append(open_record(item.ex))
                finals.append(None)
            except Exception:
                log.exception("could not build the streaming row of %s", item.ex.id)
            continue
        try:
            records.append(to_record(item))
        except Exception:  # a bug in assembly must not lose the record
            log.exception("could not assemble record %s; storing it without a response", item.id)
            records.append(_bare_record(item))
        finals.append(item)
    try:
        store.insert_many(records)
        out.written = len(records)
        out.finished = [ex for ex in finals if ex is not None]
        return out
    except Exception:
        log.exception("batch insert failed; retrying one by one")
    for rec, final in zip(records, finals, strict=True):
        for attempt in range(3):
            try:
                store.insert(rec)
                out.written += 1
                if final is not None:
                    out.finished.append(final)
                break
            except Exception:
                time.sleep(0.05 * (attempt + 1))
        else:
            out.failed += 1
            log.error("record %s could not be stored", rec.id)
    return out

"""The recorder: exchanges go on a queue; one writer thread turns them into records.

The response path only appends bytes and enqueues; JSON parsing, stream assembly and the
SQLite insert happen on the writer thread, batched, one row per exchange. ``flush`` waits
until everything queued is stored; ``stop`` flushes, so every receipt handed out has its
record once the server has shut down.
"""

from __future__ import annotations

import json
import logging
import queue
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from reef_cli.core.records import RawJSON, Record, RecordStore, now_iso
from reef_cli.server import assemble

log = logging.getLogger("reef.serve")
_SESSION_IN_USER_ID = re.compile(r"session_([0-9A-Za-z-]{8,64})")


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


def to_record(ex: Exchange) -> Record:
    request = _json(ex.request)
    if ex.stream and ex.chunks:
        raw = b"".join(ex.chunks)
        response: Any = (
            assemble.anthropic_stream(raw)
            if ex.client_dialect == "anthropic"
            else assemble.openai_stream(raw)
        )
        stored_response = response
    else:
        response = _json(ex.body)
        stored_response = _raw(ex.body, response)
    usage, inp, out = assemble.usage_of(ex.client_dialect, response)
    ended = ex.ended or time.perf_counter()
    model = request.get("model") if isinstance(request, dict) else None
    return Record(
        id=ex.id,
        scenario=ex.scenario,
        release_id=ex.release_id,
        session_id=session_of(ex.session_header, request),
        client_dialect=ex.client_dialect,
        upstream_dialect=ex.upstream_dialect,
        model=model if isinstance(model, str) else None,
        stream=ex.stream,
        request=_raw(ex.request, request),
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
        created_at=ex.created_at,
    )


class Recorder:
    def __init__(self, store: RecordStore, batch: int = 512, linger: float = 0.01) -> None:
        self.store = store
        self.batch = batch
        self.linger = linger  # wait this long after the first item, to write in batches
        self._queue: queue.Queue[Exchange | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="reef-recorder", daemon=True)
        self._stopped = False
        self.written = 0
        self.failed = 0

    def start(self) -> None:
        self._thread.start()

    def submit(self, exchange: Exchange) -> None:
        """Queue an exchange for writing; a second submit of the same exchange is a no-op."""
        if exchange.submitted:
            return
        exchange.submitted = True
        if exchange.ended is None:
            exchange.ended = time.perf_counter()
        if self._stopped and not self._thread.is_alive():
            self._write([exchange])  # late arrival after shutdown: store it right here
            return
        self._queue.put(exchange)

    @property
    def pending(self) -> int:
        return self._queue.unfinished_tasks

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every queued exchange is stored (or ``timeout`` passes)."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.002)
        return not self._queue.unfinished_tasks

    def stop(self, timeout: float = 30.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is not None and self.linger:
                time.sleep(self.linger)  # releases the GIL; one commit for many records
            items = [item]
            while len(items) < self.batch:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            exchanges = [i for i in items if i is not None]
            try:
                self._write(exchanges)
            finally:
                for _ in items:
                    self._queue.task_done()
            if None in items:
                # drain whatever arrived after the stop marker
                rest: list[Exchange] = []
                while True:
                    try:
                        extra = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if extra is not None:
                        rest.append(extra)
                    self._queue.task_done()
                self._write(rest)
                self.store.close()
                return

    def _write(self, exchanges: list[Exchange]) -> None:
        if not exchanges:
            return
        records = []
        for ex in exchanges:
            try:
                records.append(to_record(ex))
            except Exception:  # a bug in assembly must not lose the record
                log.exception("could not assemble record %s; storing it without a response", ex.id)
                records.append(
                    Record(
                        id=ex.id,
                        scenario=ex.scenario,
                        client_dialect=ex.client_dialect,
                        upstream_dialect=ex.upstream_dialect,
                        release_id=ex.release_id,
                        status=ex.status,
                        error=(ex.error or "") + " (response could not be assembled)",
                    )
                )
        try:
            self.store.insert_many(records)
            self.written += len(records)
        except Exception:
            log.exception("batch insert failed; retrying one by one")
            for rec in records:
                for attempt in range(3):
                    try:
                        self.store.insert(rec)
                        self.written += 1
                        break
                    except Exception:
                        time.sleep(0.05 * (attempt + 1))
                else:
                    self.failed += 1
                    log.error("record %s could not be stored", rec.id)

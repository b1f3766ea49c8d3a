"""What the adapters' harvests share: which transcript files changed since a moment,
reading JSONL transcripts, timestamps, and receipts from Reef's record store."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from adapters.base import Session

S = TypeVar("S", bound=Session)
_EARLIEST = datetime.min.replace(tzinfo=UTC)


def as_utc(moment: datetime | None) -> datetime | None:
    """A naive ``since`` is taken as UTC."""
    if moment is not None and moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment


def parse_time(text: Any) -> datetime | None:
    """An ISO timestamp (``…Z`` too) as an aware datetime (naive: UTC); None otherwise."""
    if not isinstance(text, str) or not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def touched_since(files: Iterable[Path], since: datetime | None) -> Iterator[Path]:
    """``files`` modified at or after ``since`` (all of them when it is None); a file that
    vanished or cannot be read is skipped."""
    for path in files:
        if since is not None:
            try:
                if datetime.fromtimestamp(path.stat().st_mtime, UTC) < since:
                    continue
            except OSError:
                continue
        yield path


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a transcript, one a line; an unreadable file yields nothing and
    a broken line (cut short by a crash) is skipped."""
    try:
        handle = path.open(encoding="utf-8", errors="replace")
    except OSError:
        return
    with handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                yield entry


def active_since(
    files: Iterable[Path], parse: Callable[[Path], S], since: datetime | None
) -> list[S]:
    """The sessions in ``files`` still active at or after ``since`` that hold a turn (one
    with nothing but bookkeeping, e.g. a prompt a hook blocked, is no session)."""
    since = as_utc(since)
    found: list[S] = []
    for path in touched_since(files, since):
        session = parse(path)
        ended = parse_time(session.ended_at)
        if since is not None and (ended is None or ended < since):
            continue
        if session.turns:
            found.append(session)
    return found


def oldest_first(sessions: list[S]) -> list[S]:
    sessions.sort(key=lambda s: parse_time(s.started_at) or _EARLIEST)
    return sessions


def span(stamps: list[str]) -> tuple[str | None, str | None]:
    """(earliest, latest) of a transcript's timestamps, as written."""
    if not stamps:
        return None, None
    ordered = sorted(stamps, key=lambda s: parse_time(s) or _EARLIEST)
    return ordered[0], ordered[-1]


@contextlib.contextmanager
def record_store(store: Any = None) -> Iterator[Any]:
    """``store``, else Reef's record store in REEF_HOME (closed afterwards), else None
    when there is none: harvesting never creates one."""
    if store is not None:
        yield store
        return
    from reef_cli.core.records import db_path
    from reef_cli.core.store import database_url, open_store

    if not database_url() and not db_path().exists():
        yield None
        return
    opened = open_store()
    try:
        yield opened
    finally:
        opened.close()


def receipts(session_ids: Iterable[str], store: Any = None) -> dict[str, list[str]]:
    """Record ids filed under each session id, oldest first (ids with none are left out)."""
    wanted = list(dict.fromkeys(session_ids))
    if not wanted:
        return {}
    out: dict[str, list[str]] = {}
    with record_store(store) as records:
        if records is None:
            return {}
        for sid in wanted:
            rows = records.list(session_id=sid, limit=None, oldest_first=True)
            if rows:
                out[sid] = [r.id for r in rows]
    return out

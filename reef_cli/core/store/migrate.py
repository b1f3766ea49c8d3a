"""Copy one store into another (`reef records migrate`): SQLite up to PostgreSQL, say.

Records go first, oldest first, a batch (:data:`BATCH`) per transaction; then reports
(whose references then find their records), harvested sessions, jobs and recipe marks.
Every step compares with what the target already holds, so the copy is

- **idempotent**: a row already there is not written again (a batch whose rows are all
  there costs one lookup); running it twice copies nothing the second time;
- **resumable**: an interrupted run leaves whole batches behind (each is one
  transaction), and the next run skips those and carries on where it stopped.

At the end the counts are compared: a source that grew meanwhile (`reef serve` still
writing) or a target that holds other traffic is a :class:`MigrationIncomplete`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

from reef_cli.core.errors import ConfigError, StateError
from reef_cli.core.records import Record, state_rank
from reef_cli.core.store.base import Store
from reef_cli.core.store_url import POSTGRES_SCHEMES, scheme_of, shown_url, sqlite_path

BATCH = 1000  # records per transaction: a resumed copy redoes at most this many
KINDS = ("records", "reports", "harvested", "jobs", "marks")
_DRIVERS = ("psycopg", "psycopg_pool", "sqlite3")  # a database failing mid-copy

Progress = Callable[[str, int, int], None]  # (kind, done, total) after each batch
T = TypeVar("T")


class MigrationSameDatabase(ConfigError):
    """`reef records migrate` was pointed at the database it reads from."""

    exit_code = 2


class MigrationIncomplete(StateError):
    """A migration stopped part-way (a lost connection), or after it the target's counts
    differ from the source's."""


@dataclass
class Counts:
    copied: int = 0  # written now
    present: int = 0  # already in the target, left alone

    def to_json(self) -> dict[str, int]:
        return {"copied": self.copied, "present": self.present}


@dataclass
class CopyResult:
    source: str
    target: str
    kinds: dict[str, Counts] = field(default_factory=lambda: {k: Counts() for k in KINDS})

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            **{kind: counts.to_json() for kind, counts in self.kinds.items()},
        }


def identity(url: str) -> tuple[str, ...]:
    """What names one database, whatever the spelling of its URL: (``sqlite``, real path)
    or (``postgresql``, host, port, database); the user and password do not matter."""
    scheme = scheme_of(url)
    path = sqlite_path(url)
    if path is not None:
        return ("sqlite", os.path.realpath(path))
    if scheme in POSTGRES_SCHEMES:
        parts = urlsplit(url)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        host = query.get("host") or parts.hostname or "localhost"
        if host in ("127.0.0.1", "::1"):
            host = "localhost"
        try:
            port = str(query.get("port") or parts.port or 5432)
        except ValueError:
            port = "?"
        db = query.get("dbname") or unquote(parts.path.lstrip("/")) or parts.username or ""
        return ("postgresql", host, port, db)
    return (scheme, url)


def check_distinct(source_url: str, target_url: str) -> None:
    """Refuse to copy a database into itself (it would only re-read what it writes)."""
    if identity(source_url) == identity(target_url):
        raise MigrationSameDatabase(
            f"the target {shown_url(target_url)} is the database the records come from",
            "pass --to a different database (and --from the one to copy, if not the current)",
        )


def _batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    it = iter(items)
    while batch := list(islice(it, size)):
        yield batch


def _copy_records(source: Store, target: Store, counts: Counts, progress: Progress) -> None:
    total = source.count()
    # rows the target may hold already: once that many were found, the rest cannot be
    # there, so a fresh copy does no look-ups and a resumed one stops where it left off
    unseen = target.count()
    done = 0
    progress("records", 0, total)
    for batch in _batches(source.iter(oldest_first=True), BATCH):
        there = target.states([r.id for r in batch]) if unseen > 0 else {}
        unseen -= len(there)
        # missing, or further along in the source (a stream that finished since the last
        # run); the upsert never moves a row back, so a rewrite cannot lose progress
        todo: list[Record] = [
            r for r in batch if r.id not in there or state_rank(there[r.id]) < state_rank(r.state)
        ]
        if todo:
            target.insert_many(todo)
        counts.copied += len(todo)
        counts.present += len(batch) - len(todo)
        done += len(batch)
        progress("records", done, max(total, done))


def _copy_reports(source: Store, target: Store, counts: Counts, progress: Progress) -> None:
    rows = source.reports()
    there = {r.id for r in target.reports()}
    progress("reports", 0, len(rows))
    for done, row in enumerate(rows, start=1):
        if row.id in there:
            counts.present += 1
        else:
            _stored, created = target.put_report(row)
            counts.copied += created
            counts.present += not created
        if done % BATCH == 0 or done == len(rows):
            progress("reports", done, len(rows))


def _copy_harvested(source: Store, target: Store, counts: Counts, progress: Progress) -> None:
    rows = source.harvested()
    there = {(h.agent, h.session_id): h.to_json() for h in target.harvested()}
    todo = [h for h in rows if there.get((h.agent, h.session_id)) != h.to_json()]
    progress("harvested", 0, len(rows))
    for batch in _batches(todo, BATCH):
        target.upsert_harvested(batch)
    counts.copied, counts.present = len(todo), len(rows) - len(todo)
    progress("harvested", len(rows), len(rows))


def _copy_jobs_and_marks(source: Store, target: Store, result: CopyResult) -> None:
    jobs, marks = result.kinds["jobs"], result.kinds["marks"]
    for job in source.jobs():
        if target.load_job(str(job["id"])) == job:
            jobs.present += 1
        else:
            target.save_job(job)
            jobs.copied += 1
    for scenario, name, data in source.marks():
        if target.load_mark(scenario, name) == data:
            marks.present += 1
        else:
            target.save_mark(scenario, name, data)
            marks.copied += 1


def _verify(source: Store, target: Store) -> None:
    for what, src, dst in (
        ("records", source.count(), target.count()),
        ("reports", source.report_count(), target.report_count()),
    ):
        if src != dst:
            raise MigrationIncomplete(
                f"after the copy the source holds {src} {what} and the target {dst}",
                "stop `reef serve` and run `reef records migrate` again; a target that "
                "holds other traffic cannot be checked: migrate into an empty database",
            )


def copy_store(source: Store, target: Store, progress: Progress | None = None) -> CopyResult:
    """Copy everything ``source`` holds into ``target`` (see the module doc); an exception
    from ``progress`` stops the copy after a whole batch, and a re-run resumes it."""
    check_distinct(source.url, target.url)
    tick: Progress = progress or (lambda _kind, _done, _total: None)
    result = CopyResult(source=source.url, target=target.url)
    try:
        _copy_records(source, target, result.kinds["records"], tick)
        _copy_reports(source, target, result.kinds["reports"], tick)
        _copy_harvested(source, target, result.kinds["harvested"], tick)
        _copy_jobs_and_marks(source, target, result)
    except Exception as exc:
        if type(exc).__module__.split(".")[0] not in _DRIVERS:
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        done = result.kinds["records"]
        raise MigrationIncomplete(
            f"the copy stopped after {done.copied + done.present} records: {first}",
            "run the same `reef records migrate` again: it resumes where this one stopped",
        ) from None
    _verify(source, target)
    return result

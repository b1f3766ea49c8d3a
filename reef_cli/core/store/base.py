"""The store interface: what Reef keeps about traffic, whatever database holds it.

Two backends implement :class:`Store`: SQLite (``sqlite.py``, the embedded default: one
file in the state dir) and PostgreSQL (``postgres.py``, for a team: several `reef serve`
replicas on one database). Everything above the store — the recorder, reports, the live
loop, harvesting, recipes, the CLI — talks to this interface only, so a query the live
loop needs is written once per backend here and nowhere else.

What a store holds: records (one per inference exchange), reports and the receipts they
reference, harvested agent sessions, evolution jobs, recipe marks (which sessions a recipe
already consumed), and the locks replicas coordinate with.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from reef_cli.core.errors import ConfigError, StateError
from reef_cli.core.records import HarvestedSession, Record

JOURNAL_DIR_NAME = "records-journal"  # the recorder's receipt journal, in the state dir


class DatabaseURLInvalid(ConfigError):
    """``REEF_DATABASE_URL`` (or ``database_url``) names no database Reef can use."""

    exit_code = 2


class DatabaseUnreachable(StateError):
    """The configured PostgreSQL server cannot be reached or refused the login."""

    exit_code = 3
    http_status = 503


@dataclass(frozen=True)
class ReportRow:
    """A stored report as the store keeps it (``core.reports`` validates and shapes it)."""

    id: str
    scenario: str
    score: float | None
    feedback: Any
    references: list[str]
    metadata: Any
    content_hash: str
    created_at: str


@dataclass(frozen=True)
class ScenarioSize:
    """How much one scenario's records take (``reef records stats``)."""

    scenario: str
    records: int
    bytes: int  # stored request + response bytes
    oldest: str | None
    newest: str | None
    referenced: int  # records a report references (never evicted)

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "records": self.records,
            "bytes": self.bytes,
            "oldest": self.oldest,
            "newest": self.newest,
            "referenced": self.referenced,
        }


@dataclass(frozen=True)
class Evicted:
    records: int
    bytes: int


class Store(ABC):
    """Records, reports, harvested sessions, jobs, marks and locks (see the module doc).

    A store is safe to share between threads. ``journal_dir`` is where the recorder keeps
    its receipt journal: always on the local disk of the process, whatever the backend."""

    kind: ClassVar[str]
    url: str
    journal_dir: Path

    @abstractmethod
    def close(self) -> None: ...

    def reopen_url(self) -> str | None:
        """The URL another process opens this same store by (the record writer process),
        password included: never log or show it. None: this store cannot be shared so."""
        return None

    def release_thread(self) -> None:
        """A thread that is about to end gives back what it holds (SQLite: its own
        connection; a pool needs nothing)."""
        return None

    # ------------------------------------------------------------ records

    def insert(self, record: Record) -> None:
        self.insert_many([record])

    @abstractmethod
    def insert_many(self, records: Sequence[Record]) -> None:
        """Store records, each row whole, one transaction for the batch. A row with the
        same id is replaced unless that would move it back (``core.records``)."""

    @abstractmethod
    def states(self, record_ids: Sequence[str]) -> dict[str, str]:
        """``{receipt: state}`` for the receipts that have a record."""

    @abstractmethod
    def exists(self, record_ids: Sequence[str]) -> dict[str, str]:
        """``{receipt: scenario}`` for the receipts that have a record."""

    @abstractmethod
    def get(self, record_id: str) -> Record:
        """The record, or ``RecordNotFound``."""

    def latest(self, scenario: str | None = None) -> Record | None:
        rows = self.list(scenario=scenario, limit=1)
        return rows[0] if rows else None

    def list(
        self,
        *,
        scenario: str | None = None,
        session_id: str | None = None,
        since: str | None = None,
        limit: int | None = 50,
        oldest_first: bool = False,
        tags: Mapping[str, str] | None = None,
    ) -> builtins.list[Record]:
        return builtins.list(
            self.iter(
                scenario=scenario,
                session_id=session_id,
                since=since,
                limit=limit,
                oldest_first=oldest_first,
                tags=tags,
            )
        )

    @abstractmethod
    def iter(
        self,
        *,
        scenario: str | None = None,
        session_id: str | None = None,
        since: str | None = None,
        limit: int | None = None,
        oldest_first: bool = True,
        tags: Mapping[str, str] | None = None,
    ) -> Iterator[Record]:
        """Records in ``created_at`` order, read a page at a time (fine for millions);
        ``tags``: only those sent with every one of these x-reef-tag values."""

    @abstractmethod
    def count(self, scenario: str | None = None) -> int: ...

    @abstractmethod
    def sessions(
        self, *, scenario: str | None = None, limit: int = 50
    ) -> builtins.list[dict[str, Any]]:
        """Per-session summaries (records, first and last time, tokens), newest first."""

    @abstractmethod
    def sessions_by_id(self, session_ids: Sequence[str]) -> builtins.list[dict[str, Any]]: ...

    # ------------------------------------------------------------ harvested sessions

    @abstractmethod
    def upsert_harvested(self, sessions: Sequence[HarvestedSession]) -> int:
        """Store harvested sessions, replacing an earlier harvest of the same
        ``(agent, session_id)``; all rows or none. Returns the count."""

    @abstractmethod
    def harvested(
        self,
        *,
        agent: str | None = None,
        session_id: str | None = None,
        limit: int | None = None,
    ) -> builtins.list[HarvestedSession]:
        """Most recently active first; ``session_id`` matches the agent's own id or the one
        Reef's records carry."""

    # ------------------------------------------------------------ reports

    @abstractmethod
    def put_report(self, row: ReportRow) -> tuple[ReportRow, bool]:
        """Store a report and its references in one transaction unless its id is taken.
        Returns (the stored row, whether it was created now)."""

    @abstractmethod
    def reports(
        self, *, scenario: str | None = None, record_id: str | None = None
    ) -> builtins.list[ReportRow]:
        """Reports, oldest first; ``record_id``: only those that reference it."""

    @abstractmethod
    def report_count(self, scenario: str | None = None) -> int: ...

    # ------------------------------------------------------------ the live loop's queries

    @abstractmethod
    def probe(self, scenario: str) -> builtins.list[Any]:
        """Values that change whenever a count of ``scenario`` could: the newest record and
        report, the harvested sessions' count and newest harvest (index seeks only)."""

    @abstractmethod
    def has_records(self, scenario: str) -> bool: ...

    @abstractmethod
    def records_at_most(self, scenario: str, limit: int) -> int:
        """How many records ``scenario`` has, counting no further than ``limit`` + 1."""

    @abstractmethod
    def scored_sessions(self, scenario: str) -> int:
        """Sessions of ``scenario`` with a scored report: no count can find more eligible."""

    @abstractmethod
    def session_scores(self, scenario: str, *, limit: int) -> builtins.list[dict[str, Any]]:
        """The newest ``limit`` sessions of ``scenario`` with a scored report, oldest first:
        ``{"session", "first_at", "score", "reports"}`` — the key ``evidence.collect``
        gives it, its first record's time, the mean of its reports' scores (each report
        once) and how many there are. For the release page's accept curve: no bodies read."""

    @abstractmethod
    def release_scores(self, scenario: str) -> builtins.list[dict[str, Any]]:
        """Per release ``scenario``'s records are credited to (oldest release first):
        ``{"release", "records", "reports", "score"}`` — finished records, the scored
        reports that reference them (each report once per release) and those reports'
        mean score (None when there are none). For the console's by-release table."""

    # ------------------------------------------------------------ jobs and marks

    @abstractmethod
    def save_job(self, data: dict[str, Any]) -> None: ...

    @abstractmethod
    def load_job(self, job_id: str) -> dict[str, Any] | None: ...

    @abstractmethod
    def jobs(self, *, active_only: bool = False) -> builtins.list[dict[str, Any]]:
        """Every job (``active_only``: queued or running ones), oldest first."""

    @abstractmethod
    def load_mark(self, scenario: str, name: str) -> dict[str, Any] | None: ...

    @abstractmethod
    def save_mark(self, scenario: str, name: str, data: dict[str, Any]) -> None: ...

    @abstractmethod
    def marks(self) -> builtins.list[tuple[str, str, dict[str, Any]]]: ...

    @abstractmethod
    def mark_version(self, scenario: str, name: str) -> Any:
        """A value that changes whenever the mark is saved, cheaper than reading it (the
        live loop asks on every poll)."""

    # ------------------------------------------------------------ coordination

    @abstractmethod
    def exclusive(self, key: str) -> AbstractContextManager[bool]:
        """Try to hold ``key`` for the ``with`` block, without waiting: True when this
        process holds it now (no other replica on this store does), False when another
        holds it. Released at the end of the block, or when the process dies."""

    # ------------------------------------------------------------ retention

    @abstractmethod
    def sizes(self) -> builtins.list[ScenarioSize]: ...

    @abstractmethod
    def evict(
        self,
        *,
        before: str | None = None,
        max_bytes: int | None = None,
        protected: Collection[str] = (),
    ) -> Evicted:
        """Delete records oldest first: those created before ``before``, then more until
        the total is at most ``max_bytes``. Never a ``streaming`` row, a record a report
        references, or one in ``protected`` (receipts a release cites as evidence)."""

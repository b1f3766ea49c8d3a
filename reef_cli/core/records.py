"""Records: one recorded inference exchange per row, in SQLite (WAL) under the state dir.

The schema is versioned by *named* migrations (``schema_migrations`` holds the names
applied); each migration runs in one transaction. A record is one row inserted in one
transaction, so a crash leaves either no row or a whole one. A row's ``state`` says how far
the exchange got: ``streaming`` (a stream still running: the row exists from its first
byte, without a response yet), ``complete``, or ``interrupted`` (the server stopped before
the exchange finished; the response holds what had been sent). Writes never move a row
back (``complete`` is not replaced by ``interrupted``, nor either by ``streaming``).
Sessions are not a table: they are the records that share a ``session_id``.
``harvested_sessions`` holds what the agents' own transcripts say about a session (turns,
tool calls, skills, receipts), one row per ``(agent, session_id)``; harvesting again
replaces the row whole.

Importable without the server stack (stdlib only).
"""

from __future__ import annotations

import builtins
import contextlib
import json
import secrets
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reef_cli.core import paths
from reef_cli.core.errors import ReefError, StateError

DB_NAME = "records.sqlite3"


class RecordNotFound(ReefError):
    """No record has that receipt id."""

    http_status = 404


def db_path() -> Path:
    return paths.state_dir() / DB_NAME


def new_receipt() -> str:
    """A receipt id: ``rec_`` + 24 hex digits (96 random bits)."""
    return "rec_" + secrets.token_hex(12)


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_records",
        """
        CREATE TABLE records (
            id TEXT PRIMARY KEY,
            scenario TEXT NOT NULL,
            release_id INTEGER,
            session_id TEXT,
            client_dialect TEXT NOT NULL,
            upstream_dialect TEXT NOT NULL,
            model TEXT,
            stream INTEGER NOT NULL DEFAULT 0,
            request TEXT,
            response TEXT,
            usage TEXT,
            input_tokens INTEGER,
            output_tokens INTEGER,
            latency_ms REAL,
            first_chunk_ms REAL,
            status INTEGER,
            error TEXT,
            created_at TEXT NOT NULL
        );
        CREATE INDEX records_scenario ON records(scenario, created_at);
        CREATE INDEX records_session ON records(session_id, created_at);
        """,
    ),
    (
        "0002_reports",
        """
        CREATE TABLE reports (
            id TEXT PRIMARY KEY,
            scenario TEXT NOT NULL,
            score REAL,
            feedback TEXT,
            refs TEXT NOT NULL,
            metadata TEXT,
            content_hash TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE TABLE report_refs (
            report_id TEXT NOT NULL REFERENCES reports(id),
            record_id TEXT NOT NULL,
            PRIMARY KEY (report_id, record_id)
        );
        CREATE INDEX report_refs_record ON report_refs(record_id);
        CREATE INDEX reports_scenario ON reports(scenario, created_at);
        """,
    ),
    (
        "0003_harvested_sessions",
        """
        CREATE TABLE harvested_sessions (
            agent TEXT NOT NULL,
            session_id TEXT NOT NULL,
            record_session_id TEXT,
            path TEXT NOT NULL,
            cwd TEXT,
            started_at TEXT,
            ended_at TEXT,
            model TEXT,
            turns TEXT NOT NULL,
            skills_used TEXT NOT NULL,
            receipts TEXT NOT NULL,
            harvested_at TEXT NOT NULL,
            UNIQUE (agent, session_id)
        );
        CREATE INDEX harvested_record_session ON harvested_sessions(record_session_id);
        CREATE INDEX harvested_ended ON harvested_sessions(ended_at);
        """,
    ),
    (
        "0004_record_state_and_release_source",
        """
        ALTER TABLE records ADD COLUMN state TEXT NOT NULL DEFAULT 'complete';
        ALTER TABLE records ADD COLUMN served_release_id INTEGER;
        ALTER TABLE records ADD COLUMN release_note TEXT
        """,
    ),
    (
        "0005_weight_version_and_tokens",
        """
        ALTER TABLE records ADD COLUMN weight_version TEXT;
        ALTER TABLE records ADD COLUMN weight_note TEXT;
        ALTER TABLE records ADD COLUMN token_ids TEXT;
        ALTER TABLE records ADD COLUMN logprobs TEXT
        """,
    ),
]


@dataclass
class Record:
    id: str
    scenario: str
    client_dialect: str
    upstream_dialect: str
    release_id: int | None = None
    session_id: str | None = None
    model: str | None = None
    stream: bool = False
    request: Any = None
    response: Any = None
    usage: dict[str, Any] | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_ms: float | None = None
    first_chunk_ms: float | None = None
    status: int | None = None
    error: str | None = None
    created_at: str = field(default_factory=now_iso)
    # streaming | complete | interrupted (see the module docstring)
    state: str = "complete"
    # the release the server served when the request came; ``release_id`` is the one the
    # record is credited to: the client's ``x-reef-release-id`` when valid, else this one
    served_release_id: int | None = None
    # why a client's x-reef-release-id was not used (None when it was, or none came)
    release_note: str | None = None
    # reefd: the engine's weight version when the request came (None: no reefd), and why
    # the record cannot train that version (it spanned a swap, the engine was inconsistent)
    weight_version: str | None = None
    weight_note: str | None = None
    # what the engine returned of its tokens (non-streamed answers only): {"prompt": [...],
    # "response": [...]} and the response tokens' logprobs; streamed records are re-tokenized
    token_ids: dict[str, Any] | None = None
    logprobs: list[float] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> dict[str, Any]:
        data = self.to_json()
        data.pop("request")
        data.pop("response")
        return data


_COLUMNS = [
    "id",
    "scenario",
    "release_id",
    "session_id",
    "client_dialect",
    "upstream_dialect",
    "model",
    "stream",
    "request",
    "response",
    "usage",
    "input_tokens",
    "output_tokens",
    "latency_ms",
    "first_chunk_ms",
    "status",
    "error",
    "created_at",
    "state",
    "served_release_id",
    "release_note",
    "weight_version",
    "weight_note",
    "token_ids",
    "logprobs",
]
_JSON_COLUMNS = {"request", "response", "usage", "token_ids", "logprobs"}


def _rank(table: str) -> str:
    return f"CASE {table}.state WHEN 'complete' THEN 2 WHEN 'interrupted' THEN 1 ELSE 0 END"


_CHUNK = 200  # rows per statement: 200 x 25 values, well under SQLite's variable limit
_ROW_MARKS = "(" + ",".join("?" * len(_COLUMNS)) + ")"
_ON_CONFLICT = (
    " ON CONFLICT (id) DO UPDATE SET "
    + ",".join(f"{c} = excluded.{c}" for c in _COLUMNS if c != "id")
    + f" WHERE excluded.state != 'streaming' AND {_rank('excluded')} >= {_rank('records')}"
)
_UPSERTS: dict[int, str] = {}


def _upsert(rows: int) -> str:
    """``INSERT … VALUES (…),(…) ON CONFLICT …`` for ``rows`` rows; rows later in the
    statement see the earlier ones (a stream's ``streaming`` row and its final row may
    come in one batch)."""
    sql = _UPSERTS.get(rows)
    if sql is None:
        sql = _UPSERTS[rows] = (
            f"INSERT INTO records ({','.join(_COLUMNS)}) VALUES "
            + ",".join([_ROW_MARKS] * rows)
            + _ON_CONFLICT
        )
    return sql


class RawJSON(str):
    """Text that is already JSON: stored as is, without decoding and re-encoding."""


def _dump(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, RawJSON):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _row_values(rec: Record) -> tuple[Any, ...]:
    out: list[Any] = []
    for col in _COLUMNS:
        value = getattr(rec, col)
        if col in _JSON_COLUMNS:
            value = _dump(value)
        elif col == "stream":
            value = int(bool(value))
        out.append(value)
    return tuple(out)


def _from_row(row: sqlite3.Row) -> Record:
    data = {col: row[col] for col in _COLUMNS}
    for col in _JSON_COLUMNS:
        if data[col] is not None:
            with contextlib.suppress(ValueError):
                data[col] = json.loads(data[col])
    data["stream"] = bool(data["stream"])
    return Record(**data)


def connect(path: Path) -> sqlite3.Connection:
    """Open (and migrate) the database at ``path``: WAL, NORMAL sync, a busy timeout.

    The file is created 0600 in a 0700 directory (it holds every prompt); SQLite gives
    its -wal and -shm files the database file's mode."""
    try:
        if path.parent == paths.state_dir():
            paths.ensure_state_dir()
        else:
            paths.ensure_private_dir(path.parent)
        paths.private_file(path)
        conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    except (OSError, sqlite3.Error) as exc:
        raise StateError(
            f"cannot open the records database {path}: {exc}", "set REEF_HOME to a writable dir"
        ) from exc
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=30000")
    migrate(conn)
    return conn


_migrate_lock = threading.Lock()


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Apply every named migration not yet applied; return the names applied now."""
    applied_now: list[str] = []
    with _migrate_lock:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT)"
        )
        for name, sql in MIGRATIONS:
            conn.execute("BEGIN IMMEDIATE")
            try:
                done = conn.execute(
                    "SELECT 1 FROM schema_migrations WHERE name = ?", (name,)
                ).fetchone()
                if done is None:
                    for statement in sql.split(";"):
                        if statement.strip():
                            conn.execute(statement)
                    conn.execute("INSERT INTO schema_migrations VALUES (?, ?)", (name, now_iso()))
                    applied_now.append(name)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
    return applied_now


class RecordStore:
    """Reads and writes records. One connection per thread (SQLite connections are not shared)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or db_path()
        self._local = threading.local()
        connect(self.path).close()  # create + migrate once, up front

    @property
    def conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            self._local.conn = conn
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # ------------------------------------------------------------ writing

    def insert(self, record: Record) -> None:
        self.insert_many([record])

    def insert_many(self, records: Sequence[Record]) -> None:
        """Insert records; each row is whole (one transaction for the batch).

        A row with the same id is replaced unless that would move it back: a
        ``streaming`` row never replaces an existing one, an ``interrupted`` one never
        replaces a ``complete`` one."""
        if not records:
            return
        conn = self.conn
        rows = [_row_values(r) for r in records]
        conn.execute("BEGIN IMMEDIATE")
        try:
            # One multi-row statement per chunk rather than executemany: the sqlite3 module
            # drops and retakes the GIL around every step, and each retake can force the
            # serving thread off the GIL (docs/performance.md, "Where the tail comes from").
            for start in range(0, len(rows), _CHUNK):
                chunk = rows[start : start + _CHUNK]
                conn.execute(_upsert(len(chunk)), [v for row in chunk for v in row])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def states(self, record_ids: Sequence[str]) -> dict[str, str]:
        """``{receipt: state}`` for the receipts that have a record."""
        return self._column_of("state", record_ids)

    def _column_of(self, column: str, record_ids: Sequence[str]) -> dict[str, str]:
        """``{receipt: column}`` for the receipts that have a record, 500 ids a query."""
        if column not in ("state", "scenario"):  # a column name, never user input
            raise ValueError(f"not a record column Reef looks up by receipt: {column!r}")
        out: dict[str, str] = {}
        ids = list(dict.fromkeys(record_ids))
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.conn.execute(
                f"SELECT id, {column} FROM records WHERE id IN ({marks})", chunk
            ):
                out[row["id"]] = row[column]
        return out

    # ------------------------------------------------------------ reading

    def get(self, record_id: str) -> Record:
        row = self.conn.execute("SELECT * FROM records WHERE id = ?", (record_id,)).fetchone()
        if row is None:
            raise RecordNotFound(
                f"no record with receipt {record_id!r}", "list receipts with `reef records list`"
            )
        return _from_row(row)

    def exists(self, record_ids: Sequence[str]) -> dict[str, str]:
        """``{receipt: scenario}`` for the receipts that have a record."""
        return self._column_of("scenario", record_ids)

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
    ) -> list[Record]:
        return list(
            self.iter(
                scenario=scenario,
                session_id=session_id,
                since=since,
                limit=limit,
                oldest_first=oldest_first,
            )
        )

    def iter(
        self,
        *,
        scenario: str | None = None,
        session_id: str | None = None,
        since: str | None = None,
        limit: int | None = None,
        oldest_first: bool = True,
    ) -> Iterator[Record]:
        where, args = _filters(scenario=scenario, session_id=session_id, since=since)
        order = "ASC" if oldest_first else "DESC"
        sql = f"SELECT * FROM records {where} ORDER BY created_at {order}, rowid {order}"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        for row in self.conn.execute(sql, args):
            yield _from_row(row)

    def count(self, scenario: str | None = None) -> int:
        where, args = _filters(scenario=scenario)
        return int(self.conn.execute(f"SELECT COUNT(*) FROM records {where}", args).fetchone()[0])

    def sessions(
        self, *, scenario: str | None = None, limit: int = 50
    ) -> builtins.list[dict[str, Any]]:
        where, args = _filters(scenario=scenario)
        where = (where + " AND" if where else "WHERE") + " session_id IS NOT NULL"
        rows = self.conn.execute(
            f"""SELECT session_id, scenario, COUNT(*) AS records, MIN(created_at) AS started_at,
                       MAX(created_at) AS last_at, SUM(COALESCE(input_tokens, 0)) AS input_tokens,
                       SUM(COALESCE(output_tokens, 0)) AS output_tokens
                FROM records {where} GROUP BY session_id, scenario
                ORDER BY last_at DESC LIMIT ?""",
            [*args, limit],
        ).fetchall()
        return [dict(r) for r in rows]

    def sessions_by_id(self, session_ids: Sequence[str]) -> builtins.list[dict[str, Any]]:
        """The same summaries as :meth:`sessions`, for the given session ids only."""
        out: builtins.list[dict[str, Any]] = []
        ids = builtins.list(dict.fromkeys(session_ids))
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.conn.execute(
                f"""SELECT session_id, scenario, COUNT(*) AS records,
                           MIN(created_at) AS started_at, MAX(created_at) AS last_at,
                           SUM(COALESCE(input_tokens, 0)) AS input_tokens,
                           SUM(COALESCE(output_tokens, 0)) AS output_tokens
                    FROM records WHERE session_id IN ({marks}) GROUP BY session_id, scenario""",
                chunk,
            ).fetchall()
            out.extend(dict(r) for r in rows)
        return out

    # ------------------------------------------------------------ harvested sessions

    def upsert_harvested(self, sessions: Sequence[HarvestedSession]) -> int:
        """Store harvested sessions, replacing an earlier harvest of the same
        ``(agent, session_id)``; all rows or none (one transaction). Returns the count."""
        if not sessions:
            return 0
        rows = [_harvest_values(s) for s in sessions]  # encode before writing anything
        cols = ",".join(_HARVEST_COLUMNS)
        updates = ",".join(
            f"{c} = excluded.{c}" for c in _HARVEST_COLUMNS if c not in ("agent", "session_id")
        )
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(
                f"INSERT INTO harvested_sessions ({cols}) "
                f"VALUES ({','.join('?' * len(_HARVEST_COLUMNS))}) "
                f"ON CONFLICT (agent, session_id) DO UPDATE SET {updates}",
                rows,
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return len(rows)

    def harvested(
        self,
        *,
        agent: str | None = None,
        session_id: str | None = None,
        limit: int | None = None,
    ) -> builtins.list[HarvestedSession]:
        """Harvested sessions, most recently active first. ``session_id`` matches the
        agent's own id or the id Reef's records carry (``record_session_id``)."""
        where, args = where_clause(
            ("agent = ?", agent), ("(session_id = ? OR record_session_id = ?)", session_id)
        )
        sql = (
            f"SELECT * FROM harvested_sessions {where} "
            "ORDER BY COALESCE(ended_at, started_at, harvested_at) DESC, rowid DESC"
        )
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [_harvest_from_row(r) for r in self.conn.execute(sql, args)]


@dataclass
class HarvestedSession:
    """One agent session as read from the agent's transcript (``reef sessions harvest``).

    ``record_session_id`` is the session id Reef's records carry for it (pi: the
    wrapper's ``REEF_SESSION_ID``; Claude Code: its own session id)."""

    agent: str
    session_id: str
    path: str
    record_session_id: str | None = None
    cwd: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    model: str | None = None
    turns: builtins.list[dict[str, Any]] = field(default_factory=builtins.list)
    skills_used: builtins.list[str] = field(default_factory=builtins.list)
    receipts: builtins.list[str] = field(default_factory=builtins.list)
    harvested_at: str = field(default_factory=now_iso)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_HARVEST_COLUMNS = [
    "agent",
    "session_id",
    "record_session_id",
    "path",
    "cwd",
    "started_at",
    "ended_at",
    "model",
    "turns",
    "skills_used",
    "receipts",
    "harvested_at",
]
_HARVEST_JSON = {"turns", "skills_used", "receipts"}


def _harvest_values(item: HarvestedSession) -> tuple[Any, ...]:
    values: list[Any] = []
    for col in _HARVEST_COLUMNS:
        value = getattr(item, col)
        if col in _HARVEST_JSON:
            value = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
        values.append(value)
    return tuple(values)


def _harvest_from_row(row: sqlite3.Row) -> HarvestedSession:
    data = {col: row[col] for col in _HARVEST_COLUMNS}
    for col in _HARVEST_JSON:
        try:
            loaded = json.loads(data[col])
        except (TypeError, ValueError):
            loaded = []
        data[col] = loaded if isinstance(loaded, builtins.list) else []
    return HarvestedSession(**data)


def where_clause(*conditions: tuple[str, Any]) -> tuple[str, list[Any]]:
    """``WHERE …`` joining the SQL fragments whose value is not None, and their arguments
    (every ``?`` of a fragment takes its value); empty when no value is set."""
    clauses: list[str] = []
    args: list[Any] = []
    for fragment, value in conditions:
        if value is not None:
            clauses.append(fragment)
            args += [value] * fragment.count("?")
    return ("WHERE " + " AND ".join(clauses) if clauses else ""), args


def _filters(
    *, scenario: str | None = None, session_id: str | None = None, since: str | None = None
) -> tuple[str, list[Any]]:
    return where_clause(
        ("scenario = ?", scenario), ("session_id = ?", session_id), ("created_at >= ?", since)
    )

"""The store's schema: one ordered list of named migrations, each with its SQL per backend.

Both backends apply exactly :data:`MIGRATIONS` and record each name in
``schema_migrations``, so a database says which schema it has in the same words whichever
backend holds it. A migration with nothing to do on a backend has no SQL there but keeps
its place and name: PostgreSQL's ``0001_records`` already creates the columns and index
SQLite gained in 0004-0006 (the PostgreSQL backend came after them), and jobs and marks
are files on SQLite (0007).

Stores made before the list was shared recorded PostgreSQL's jobs-and-marks migration as
``0004_jobs_and_marks``; :data:`RENAMED` maps it to its name here, so opening such a store
renames the row instead of running its DDL again. The other old names (all of SQLite's,
PostgreSQL's 0001-0003) are the names here already, for the same SQL.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Literal

from reef_cli.core.records import now_iso
from reef_cli.core.store.sql import Tx

Dialect = Literal["sqlite", "postgresql"]


@dataclass(frozen=True)
class Migration:
    """One named schema step; ``""`` where a backend has nothing to do."""

    name: str
    sqlite: str
    postgresql: str

    def statements(self, dialect: Dialect) -> list[str]:
        sql = self.sqlite if dialect == "sqlite" else self.postgresql
        return [s for s in sql.split(";") if s.strip()]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "0001_records",
        sqlite="""
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
        CREATE INDEX records_session ON records(session_id, created_at)
        """,
        # seq: the insertion order a page key needs (SQLite has rowid)
        postgresql="""
        CREATE TABLE records (
            seq BIGSERIAL UNIQUE,
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
            input_tokens BIGINT,
            output_tokens BIGINT,
            latency_ms DOUBLE PRECISION,
            first_chunk_ms DOUBLE PRECISION,
            status INTEGER,
            error TEXT,
            created_at TEXT NOT NULL,
            state TEXT NOT NULL DEFAULT 'complete',
            served_release_id INTEGER,
            release_note TEXT,
            weight_version TEXT,
            weight_note TEXT,
            token_ids TEXT,
            logprobs TEXT
        );
        CREATE INDEX records_scenario ON records(scenario, created_at, seq);
        CREATE INDEX records_session ON records(session_id, created_at);
        CREATE INDEX records_created ON records(created_at, seq)
        """,
    ),
    Migration(
        "0002_reports",
        sqlite="""
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
        CREATE INDEX reports_scenario ON reports(scenario, created_at)
        """,
        postgresql="""
        CREATE TABLE reports (
            id TEXT PRIMARY KEY,
            scenario TEXT NOT NULL,
            score DOUBLE PRECISION,
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
        CREATE INDEX reports_scenario ON reports(scenario, created_at)
        """,
    ),
    Migration(
        "0003_harvested_sessions",
        sqlite="""
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
        CREATE INDEX harvested_ended ON harvested_sessions(ended_at)
        """,
        postgresql="""
        CREATE TABLE harvested_sessions (
            seq BIGSERIAL UNIQUE,
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
        CREATE INDEX harvested_ended ON harvested_sessions(ended_at)
        """,
    ),
    Migration(
        "0004_record_state_and_release_source",
        sqlite="""
        ALTER TABLE records ADD COLUMN state TEXT NOT NULL DEFAULT 'complete';
        ALTER TABLE records ADD COLUMN served_release_id INTEGER;
        ALTER TABLE records ADD COLUMN release_note TEXT
        """,
        postgresql="",  # in 0001_records
    ),
    Migration(
        "0005_weight_version_and_tokens",
        sqlite="""
        ALTER TABLE records ADD COLUMN weight_version TEXT;
        ALTER TABLE records ADD COLUMN weight_note TEXT;
        ALTER TABLE records ADD COLUMN token_ids TEXT;
        ALTER TABLE records ADD COLUMN logprobs TEXT
        """,
        postgresql="",  # in 0001_records
    ),
    Migration(
        "0006_records_created_at",
        sqlite="CREATE INDEX records_created ON records(created_at)",
        postgresql="",  # in 0001_records
    ),
    Migration(
        "0007_jobs_and_marks",
        sqlite="",  # files in the state dir: jobs/, scenarios/<S>/<mark>.json
        postgresql="""
        CREATE TABLE jobs (
            id TEXT PRIMARY KEY,
            scenario TEXT NOT NULL,
            state TEXT NOT NULL,
            created_at TEXT NOT NULL,
            data TEXT NOT NULL
        );
        CREATE INDEX jobs_state ON jobs(state);
        CREATE TABLE marks (
            scenario TEXT NOT NULL,
            name TEXT NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (scenario, name)
        )
        """,
    ),
    Migration(
        "0008_records_tags",  # x-reef-tag-<name> headers: a JSON object of name -> value
        sqlite="ALTER TABLE records ADD COLUMN tags TEXT",
        postgresql="ALTER TABLE records ADD COLUMN tags TEXT",
    ),
)

NAMES: tuple[str, ...] = tuple(m.name for m in MIGRATIONS)

# old name -> its name in MIGRATIONS, for stores made before the list was shared
RENAMED: dict[str, str] = {"0004_jobs_and_marks": "0007_jobs_and_marks"}


def migrate(transaction: Callable[[], AbstractContextManager[Tx]], dialect: Dialect) -> list[str]:
    """Bring a database to :data:`MIGRATIONS`: rename old names (one transaction), then
    apply each migration not yet recorded in its own; return the names applied now.

    ``transaction`` opens one on the backend's connection; the caller keeps other
    migrators out (a lock), so a check and its write cannot interleave with theirs."""
    with transaction() as tx:
        tx.run(
            "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT)"
        )
        for old, new in RENAMED.items():
            # keeps the row's applied_at; NOT EXISTS: a row under both names cannot fail
            # the primary key (the old one just goes)
            tx.run(
                "UPDATE schema_migrations SET name = ? WHERE name = ? "
                "AND NOT EXISTS (SELECT 1 FROM schema_migrations WHERE name = ?)",
                (new, old, new),
            )
            tx.run("DELETE FROM schema_migrations WHERE name = ?", (old,))
    applied_now: list[str] = []
    for migration in MIGRATIONS:
        with transaction() as tx:
            if tx.rows("SELECT 1 FROM schema_migrations WHERE name = ?", (migration.name,)):
                continue
            for statement in migration.statements(dialect):
                tx.run(statement)
            tx.run("INSERT INTO schema_migrations VALUES (?, ?)", (migration.name, now_iso()))
            applied_now.append(migration.name)
    return applied_now

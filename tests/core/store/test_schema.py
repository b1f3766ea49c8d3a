"""One schema, one list of migration names on both backends: a fresh store records the
same names on SQLite and PostgreSQL, and a store the code before the shared list made
(its migrations copied below as they were) opens with its rows, takes the new names
without running its DDL again, and ends with a fresh store's schema."""

from __future__ import annotations

import itertools
import json
import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reef_cli.core.store import Store, schema
from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.core.store.sqlite import migrate as sqlite_migrate
from tests.core.store.conftest import BACKENDS

# The lists as sqlite.py and postgres.py held them (unchanged since each was written).
OLD_SQLITE: list[tuple[str, str]] = [
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
    (
        "0006_records_created_at",
        """
        CREATE INDEX records_created ON records(created_at)
        """,
    ),
]

OLD_POSTGRES: list[tuple[str, str]] = [
    (
        "0001_records",
        """
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
    (
        "0002_reports",
        """
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
    (
        "0003_harvested_sessions",
        """
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
    (
        "0004_jobs_and_marks",
        """
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
]

OLD = {"sqlite": OLD_SQLITE, "postgresql": OLD_POSTGRES}
OLD_AT = "2025-06-01T00:00:00.000000Z"  # applied_at of the old rows: a rename keeps it
JOB = {"id": "job_old", "scenario": "s", "state": "succeeded", "created_at": "2025"}
MARK = {"sessions": {"session:a": "fp"}}

# (backend, old migrations applied) -> what opening with the shared list applies: only
# what the old store lacked, and never DDL an old name already ran
APPLIED_ON_OPEN = {
    ("sqlite", 6): ["0007_jobs_and_marks"],
    ("sqlite", 2): [
        "0003_harvested_sessions",
        "0004_record_state_and_release_source",
        "0005_weight_version_and_tokens",
        "0006_records_created_at",
        "0007_jobs_and_marks",
    ],
    ("postgresql", 4): [
        "0004_record_state_and_release_source",
        "0005_weight_version_and_tokens",
        "0006_records_created_at",
    ],
    ("postgresql", 2): [
        "0003_harvested_sessions",
        "0004_record_state_and_release_source",
        "0005_weight_version_and_tokens",
        "0006_records_created_at",
        "0007_jobs_and_marks",
    ],
}
# the migrations made after the list was shared: every old store takes them too
for applied_on_open in APPLIED_ON_OPEN.values():
    applied_on_open.append("0008_records_tags")


class Raw:
    """A plain connection to either backend, ``?`` placeholders on both."""

    def __init__(self, kind: str, where: str) -> None:
        self.kind = kind
        if kind == "sqlite":
            self.conn: Any = sqlite3.connect(where, isolation_level=None)
        else:
            import psycopg

            self.conn = psycopg.connect(where, autocommit=True)

    def run(self, sql: str, args: tuple[Any, ...] = ()) -> None:
        self.conn.execute(sql.replace("?", "%s") if self.kind != "sqlite" else sql, args)

    def rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        sql = sql.replace("?", "%s") if self.kind != "sqlite" else sql
        return [tuple(r) for r in self.conn.execute(sql, args).fetchall()]

    def migrate(self) -> list[str]:
        if self.kind == "sqlite":
            return sqlite_migrate(self.conn)
        from reef_cli.core.store.postgres import migrate

        return migrate(self.conn)

    def migrations(self) -> list[tuple[str, str]]:
        return [(r[0], r[1]) for r in self.rows("SELECT * FROM schema_migrations ORDER BY name")]

    def shape(self) -> dict[str, Any]:
        """Tables with their columns, indexes and constraints, as the catalog tells them."""
        if self.kind == "sqlite":
            out: dict[str, Any] = {}
            for kind, name, table in self.rows(
                "SELECT type, name, tbl_name FROM sqlite_master ORDER BY name"
            ):
                pragma = "table_info" if kind == "table" else "index_info"
                out[name] = (kind, table, self.rows(f"PRAGMA {pragma}({name})"))
            return out
        return {
            "columns": self.rows(
                "SELECT table_name, ordinal_position, column_name, data_type, is_nullable, "
                "column_default FROM information_schema.columns WHERE table_schema = 'public' "
                "ORDER BY table_name, ordinal_position"
            ),
            "indexes": self.rows(
                "SELECT tablename, indexname, indexdef FROM pg_indexes "
                "WHERE schemaname = 'public' ORDER BY indexname"
            ),
            "constraints": self.rows(
                "SELECT table_name, constraint_name, constraint_type "
                "FROM information_schema.table_constraints WHERE table_schema = 'public' "
                "AND constraint_type != 'CHECK' ORDER BY constraint_name"
            ),
        }

    def close(self) -> None:
        self.conn.close()


Databases = Callable[[str], str]
_numbers = itertools.count(1)


@pytest.fixture
def databases(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Databases]:
    """``new(kind)``: where a new, empty database of that backend is (a path or a URL)."""
    made: list[tuple[Any, str]] = []  # (cluster, name) of each PostgreSQL database

    def new(kind: str) -> str:
        name = f"schema_{next(_numbers)}"
        if kind == "sqlite":
            return str(tmp_path / f"{name}.sqlite3")
        cluster = request.getfixturevalue("postgres")
        made.append((cluster, name))
        return str(cluster.create_database(name))

    yield new
    for cluster, name in made:
        cluster.drop_database(name)


def open_at(kind: str, where: str) -> Store:
    if kind == "sqlite":
        return SQLiteStore(Path(where))
    from reef_cli.core.store.postgres import PostgresStore

    return PostgresStore(where)


def build_old_store(kind: str, where: str, applied: int) -> None:
    """A store as the old code left it after its first ``applied`` migrations, with rows."""
    old = Raw(kind, where)
    try:
        old.run("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
        for name, sql in OLD[kind][:applied]:
            for statement in sql.split(";"):
                if statement.strip():
                    old.run(statement)
            old.run("INSERT INTO schema_migrations VALUES (?, ?)", (name, OLD_AT))
        old.run(
            "INSERT INTO records (id, scenario, client_dialect, upstream_dialect, request, "
            "input_tokens, created_at) VALUES ('rec_old', 's', 'openai', 'openai', "
            """'{"m": 1}', 7, '2025-06-01T00:00:01Z')"""
        )
        old.run(
            "INSERT INTO reports (id, scenario, score, refs, content_hash, created_at) "
            """VALUES ('rep_old', 's', 0.5, '["rec_old"]', 'h', '2025-06-01T00:00:02Z')"""
        )
        old.run("INSERT INTO report_refs VALUES ('rep_old', 'rec_old')")
        if ("0004_jobs_and_marks", OLD_AT) in old.migrations():
            old.run(
                "INSERT INTO jobs VALUES ('job_old', 's', 'succeeded', '2025', ?)",
                (json.dumps(JOB),),
            )
            old.run("INSERT INTO marks VALUES ('s', 'skillclaw', ?)", (json.dumps(MARK),))
    finally:
        old.close()


def test_the_list_is_numbered_in_order_and_the_renames_land_in_it() -> None:
    assert all(re.fullmatch(r"\d{4}_[a-z_]+", name) for name in schema.NAMES)
    assert [int(name[:4]) for name in schema.NAMES] == list(range(1, len(schema.NAMES) + 1))
    assert set(schema.RENAMED.values()) <= set(schema.NAMES)
    assert not set(schema.RENAMED) & set(schema.NAMES)  # an old name means one thing


def test_a_fresh_store_records_the_same_names_on_both_backends(databases: Databases) -> None:
    recorded, columns = {}, {}
    for kind in BACKENDS:
        where = databases(kind)
        open_at(kind, where).close()
        raw = Raw(kind, where)
        try:
            recorded[kind] = [name for name, _at in raw.migrations()]
            columns[kind] = {
                table: [c[1] for c in raw.rows(f"PRAGMA table_info({table})")]
                if kind == "sqlite"
                else [
                    r[0]
                    for r in raw.rows(
                        "SELECT column_name FROM information_schema.columns "
                        "WHERE table_name = ? AND column_name != 'seq' ORDER BY ordinal_position",
                        (table,),
                    )
                ]
                for table in ("records", "reports", "report_refs", "harvested_sessions")
            }
        finally:
            raw.close()
    assert recorded["sqlite"] == recorded["postgresql"] == list(schema.NAMES)
    # the dialects differ in types; the tables both hold have the same columns, in order
    assert columns["sqlite"] == columns["postgresql"]
    assert "logprobs" in columns["sqlite"]["records"]


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("all_old", [True, False], ids=["all-old", "first-two-old"])
def test_an_existing_store_keeps_its_rows_and_takes_the_new_names(
    kind: str, all_old: bool, databases: Databases
) -> None:
    applied = len(OLD[kind]) if all_old else 2
    fresh, old = databases(kind), databases(kind)
    open_at(kind, fresh).close()
    build_old_store(kind, old, applied)

    raw = Raw(kind, old)
    try:
        assert raw.migrate() == APPLIED_ON_OPEN[(kind, applied)]
        migrations = raw.migrations()
        shape = raw.shape()
    finally:
        raw.close()
    assert [name for name, _at in migrations] == list(schema.NAMES)
    # every step the old store had keeps the time it ran, renamed ones too
    kept = {schema.RENAMED.get(name, name) for name, _sql in OLD[kind][:applied]}
    assert {name for name, at in migrations if at == OLD_AT} == kept
    fresh_raw = Raw(kind, fresh)
    try:
        assert shape == fresh_raw.shape()
    finally:
        fresh_raw.close()

    store = open_at(kind, old)
    try:
        record = store.get("rec_old")
        assert (record.request, record.input_tokens, record.state) == ({"m": 1}, 7, "complete")
        assert [(r.id, r.references) for r in store.reports(record_id="rec_old")] == [
            ("rep_old", ["rec_old"])
        ]
        if kind == "postgresql" and all_old:
            assert store.load_job("job_old") == JOB
            assert store.load_mark("s", "skillclaw") == MARK
    finally:
        store.close()


@pytest.mark.parametrize("kind", BACKENDS)
def test_opening_again_changes_nothing(kind: str, databases: Databases) -> None:
    fresh, old = databases(kind), databases(kind)
    open_at(kind, fresh).close()
    build_old_store(kind, old, len(OLD[kind]))
    open_at(kind, old).close()
    for where in (fresh, old):
        raw = Raw(kind, where)
        try:
            before = (raw.migrations(), raw.shape())
            assert raw.migrate() == []
            assert (raw.migrations(), raw.shape()) == before
        finally:
            raw.close()

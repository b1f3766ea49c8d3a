"""The PostgreSQL store: one database several `reef serve` replicas share.

Through psycopg 3 with a connection pool (autocommit; writes in explicit transactions).
The recorder writes from its own thread, so the hot path needs no async driver: a
request's handler never waits on the database. Migrations run under an advisory lock, so
replicas starting together apply each one once. Jobs and recipe marks are tables here, so
every replica sees every job and what each recipe already consumed. Locks
(:meth:`PostgresStore.exclusive`) are session advisory locks: they die with the
connection, so a killed replica never leaves one behind.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import json
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from reef_cli.core import paths
from reef_cli.core.records import now_iso
from reef_cli.core.store import schema
from reef_cli.core.store.base import JOURNAL_DIR_NAME, DatabaseUnreachable
from reef_cli.core.store.sql import Row, SQLStore
from reef_cli.core.store_url import password_of, shown_url

_MIGRATION_LOCK = 0x52454546  # "REEF": one migrator at a time across replicas
_SQL: dict[str, str] = {}


def _pg(sql: str) -> str:
    """``?`` placeholders -> psycopg's ``%s`` (cached: the same statements recur)."""
    out = _SQL.get(sql)
    if out is None:
        out = _SQL[sql] = sql.replace("%", "%%").replace("?", "%s")
    return out


def _lock_key(key: str) -> int:
    """A signed 64-bit advisory lock key for ``key``."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)


class _PgTx:
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def run(self, sql: str, args: Sequence[Any] = ()) -> int:
        return self.conn.execute(_pg(sql), args).rowcount

    def rows(self, sql: str, args: Sequence[Any] = ()) -> builtins.list[Row]:
        return self.conn.execute(_pg(sql), args).fetchall()

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            with self.conn.cursor() as cur:
                cur.executemany(_pg(sql), rows)


@contextlib.contextmanager
def _transaction(conn: psycopg.Connection[Any]) -> Iterator[_PgTx]:
    with conn.transaction():
        yield _PgTx(conn)


def migrate(conn: psycopg.Connection[Any]) -> list[str]:
    """Bring the database to the one schema (``schema.py``) under an advisory lock, so
    replicas starting together apply each migration once; return the names applied now."""
    conn.execute("SELECT pg_advisory_lock(%s)", (_MIGRATION_LOCK,))
    try:
        return schema.migrate(lambda: _transaction(conn), "postgresql")
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))


def _unreachable(url: str, exc: Exception) -> DatabaseUnreachable:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    try:
        password = psycopg.conninfo.conninfo_to_dict(url).get("password")
    except psycopg.Error:  # a URL libpq cannot parse: hide what a URL parser calls one
        password = password_of(url)
    if password:
        first = first.replace(str(password), "***")
    return DatabaseUnreachable(
        f"cannot use PostgreSQL at {shown_url(url)}: {first}",
        "check that the server runs and REEF_DATABASE_URL's user, password, host, port and "
        "database are right",
    )


class PostgresStore(SQLStore):
    """The store in a PostgreSQL database (``url``: ``postgresql://user:pw@host:5432/db``)."""

    kind = "postgresql"

    def _tag_equals(self, name: str, value: str) -> tuple[str, builtins.list[Any]]:
        return "(r.tags::jsonb ->> ?) = ?", [name, value]

    ORDER = "seq"
    SIZE = "COALESCE(octet_length(r.request), 0) + COALESCE(octet_length(r.response), 0)"

    def reopen_url(self) -> str | None:
        return self._url

    def __init__(self, url: str, *, pool_size: int = 8, connect_timeout: float = 5.0) -> None:
        self.url = shown_url(url)
        self._url = url  # with its password: only for reopen_url
        self.journal_dir = paths.state_dir() / JOURNAL_DIR_NAME
        try:
            # one plain connection first: its error says why (a pool only times out)
            with psycopg.connect(
                url, connect_timeout=int(connect_timeout), autocommit=True
            ) as conn:
                migrate(conn)
        except psycopg.Error as exc:
            raise _unreachable(url, exc) from None
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True, "row_factory": dict_row},
            open=False,
            name="reef-store",
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout * 2)
        except Exception as exc:
            raise _unreachable(url, exc) from None

    def close(self) -> None:
        self._pool.close()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[_PgTx]:
        with self._pool.connection() as conn, _transaction(conn) as tx:
            yield tx

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> builtins.list[Row]:
        with self._pool.connection() as conn:
            return conn.execute(_pg(sql), args).fetchall()

    # ------------------------------------------------------------ jobs and marks: tables

    def save_job(self, data: dict[str, Any]) -> None:
        with self._transaction() as tx:
            tx.run(
                "INSERT INTO jobs (id, scenario, state, created_at, data) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET state = excluded.state, data = excluded.data",
                (
                    data["id"],
                    data.get("scenario") or "",
                    data.get("state") or "",
                    data.get("created_at") or now_iso(),
                    json.dumps(data, default=str),
                ),
            )

    def load_job(self, job_id: str) -> dict[str, Any] | None:
        row = self._one("SELECT data FROM jobs WHERE id = ?", (job_id,))
        return json.loads(row["data"]) if row else None

    def jobs(self, *, active_only: bool = False) -> builtins.list[dict[str, Any]]:
        where = "WHERE state IN ('queued', 'running')" if active_only else ""
        rows = self._rows(f"SELECT data FROM jobs {where} ORDER BY created_at, id")
        return [json.loads(r["data"]) for r in rows]

    def load_mark(self, scenario: str, name: str) -> dict[str, Any] | None:
        row = self._one("SELECT data FROM marks WHERE scenario = ? AND name = ?", (scenario, name))
        return json.loads(row["data"]) if row else None

    def save_mark(self, scenario: str, name: str, data: dict[str, Any]) -> None:
        with self._transaction() as tx:
            tx.run(
                "INSERT INTO marks (scenario, name, data) VALUES (?, ?, ?) "
                "ON CONFLICT (scenario, name) DO UPDATE SET data = excluded.data",
                (scenario, name, json.dumps(data, sort_keys=True)),
            )

    def mark_version(self, scenario: str, name: str) -> Any:
        row = self._one(
            "SELECT CAST(data AS json) ->> 'updated_at' AS v FROM marks "
            "WHERE scenario = ? AND name = ?",
            (scenario, name),
        )
        return row["v"] if row else None

    def marks(self) -> builtins.list[tuple[str, str, dict[str, Any]]]:
        rows = self._rows("SELECT scenario, name, data FROM marks ORDER BY scenario, name")
        return [(r["scenario"], r["name"], json.loads(r["data"])) for r in rows]

    # ------------------------------------------------------------ locks: advisory

    @contextlib.contextmanager
    def exclusive(self, key: str) -> Iterator[bool]:
        lock = _lock_key(key)
        with self._pool.connection() as conn:
            row = conn.execute("SELECT pg_try_advisory_lock(%s) AS held", (lock,)).fetchone()
            held = bool(row and row["held"])
            try:
                yield held
            finally:
                if held:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (lock,))

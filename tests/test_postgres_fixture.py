"""The `postgres_url` fixture gives each test its own database on one real cluster."""

from __future__ import annotations

import psycopg

from tests.fakes.postgres import PostgresCluster


def test_two_databases_are_isolated(postgres: PostgresCluster) -> None:
    # Two databases as two tests get them: a table made in one is absent from the other.
    first, second = postgres.create_database("iso_a"), postgres.create_database("iso_b")
    try:
        with psycopg.connect(first) as conn:
            conn.execute("CREATE TABLE t (v int)")
            conn.execute("INSERT INTO t VALUES (1)")
        with psycopg.connect(second) as conn:
            conn.execute("CREATE TABLE t (v int)")
            assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
        with psycopg.connect(first) as conn:
            assert conn.execute("SELECT v FROM t").fetchall() == [(1,)]
    finally:
        postgres.drop_database("iso_a")
        postgres.drop_database("iso_b")


def test_postgres_url_is_empty_and_writable(postgres_url: str) -> None:
    # The fixture's database starts with no tables of ours, whatever ran before.
    with psycopg.connect(postgres_url) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
        assert tables == (0,)
        conn.execute("CREATE TABLE t (v int)")


def test_postgres_url_again_is_fresh(postgres_url: str) -> None:
    # A second test gets a new database: the table the test above made is not here.
    with psycopg.connect(postgres_url) as conn:
        conn.execute("CREATE TABLE t (v int)")
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)

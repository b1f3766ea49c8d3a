"""Copying a store into another: everything arrives, a re-run copies nothing, an
interrupted copy resumes, and 100,000 SQLite records move into PostgreSQL with equal
counts (the issue's acceptance point)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from reef_cli.core.records import HarvestedSession, Record
from reef_cli.core.store import ReportRow, Store
from reef_cli.core.store.migrate import (
    BATCH,
    MigrationIncomplete,
    MigrationSameDatabase,
    Progress,
    copy_store,
    identity,
)
from reef_cli.core.store.postgres import PostgresStore
from reef_cli.core.store.sqlite import SQLiteStore
from tests.core.store.conftest import open_backend


def rec(n: int, **kw) -> Record:
    seconds, ms = divmod(n, 1000)
    minutes, seconds = divmod(seconds, 60)
    base = {
        "id": f"rec_{n:024x}",
        "scenario": f"s{n % 3}",
        "client_dialect": "openai",
        "upstream_dialect": "openai",
        "session_id": f"sess{n % 50}",
        "request": {"m": n},
        "created_at": f"2026-01-01T00:{minutes:02d}:{seconds:02d}.{ms:03d}000Z",
    }
    return Record(**(base | kw))


def fill(store: Store, n: int) -> None:
    """``n`` small records, inserted in big batches (100k take seconds)."""
    step = 20_000
    for start in range(0, n, step):
        store.insert_many([rec(i) for i in range(start, min(n, start + step))])


def report(n: int, refs: list[str]) -> ReportRow:
    return ReportRow(
        id=f"rep_{n:024x}",
        scenario="s0",
        score=0.5,
        feedback={"text": "ok"},
        references=refs,
        metadata={"k": n},
        content_hash=f"h{n}",
        created_at=f"2026-01-02T00:00:00.{n:06d}Z",
    )


class Stop(Exception):
    pass


def stop_after(batches: int) -> Progress:
    seen = {"n": 0}

    def progress(kind: str, done: int, total: int) -> None:
        if kind == "records" and done:
            seen["n"] += 1
            if seen["n"] >= batches:
                raise Stop

    return progress


@pytest.mark.parametrize("direction", ["sqlite->postgresql", "postgresql->sqlite"])
def test_everything_is_copied_and_a_rerun_copies_nothing(
    direction: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    src_kind, dst_kind = direction.split("->")
    source = open_backend(request, src_kind, tmp_path / "src")
    target = open_backend(request, dst_kind, tmp_path / "dst")
    try:
        records = [rec(i) for i in range(2500)]
        records.append(rec(9999, state="streaming"))
        source.insert_many(records)
        for n in range(3):
            source.put_report(report(n, [records[n].id, records[n + 10].id]))
        source.upsert_harvested(
            [HarvestedSession(agent="pi", session_id=f"h{i}", path=f"/p{i}") for i in range(3)]
        )
        job = {"id": "job_1", "scenario": "s0", "state": "succeeded", "created_at": "2026-01-01"}
        if dst_kind == "postgresql":  # SQLite's jobs and marks are files in the state dir
            source.save_job(job)
            source.save_mark("s0", "skillclaw", {"sessions": {"session:a": "fp"}})

        result = copy_store(source, target)

        assert result.kinds["records"].copied == 2501
        assert result.kinds["reports"].copied == 3 and result.kinds["harvested"].copied == 3
        assert target.count() == 2501 and target.report_count() == 3
        assert [r.to_json() for r in target.iter()] == [r.to_json() for r in source.iter()]
        assert target.reports() == source.reports()
        assert target.reports(record_id=records[10].id)[0].id == report(0, []).id
        assert {h.session_id for h in target.harvested()} == {"h0", "h1", "h2"}
        assert target.states([records[-1].id]) == {records[-1].id: "streaming"}
        if dst_kind == "postgresql":
            assert target.load_job("job_1") == job
            assert target.load_mark("s0", "skillclaw") == {"sessions": {"session:a": "fp"}}

        again = copy_store(source, target)
        assert all(c.copied == 0 for c in again.kinds.values()), again.to_json()
        assert again.kinds["records"].present == 2501 and again.kinds["reports"].present == 3
    finally:
        source.close()
        target.close()


def test_a_hundred_thousand_sqlite_records_move_into_postgresql(
    tmp_path: Path, postgres_url: str
) -> None:
    started = time.monotonic()
    source = SQLiteStore(tmp_path / "big.sqlite3")
    fill(source, 100_000)
    source.put_report(report(1, [rec(5).id, rec(99_999).id]))
    built = time.monotonic()
    target = PostgresStore(postgres_url)
    try:
        # interrupted half-way: whole batches stay behind, nothing half-written
        with pytest.raises(Stop):
            copy_store(source, target, progress=stop_after(50))
        assert target.count() == 50 * BATCH

        resumed = copy_store(source, target)
        records = resumed.kinds["records"]
        assert (records.present, records.copied) == (50 * BATCH, 50 * BATCH)
        assert target.count() == source.count() == 100_000
        assert target.report_count() == 1
        assert {s.scenario: s.records for s in target.sizes()} == {
            s.scenario: s.records for s in source.sizes()
        }
        assert target.get(rec(99_999).id).to_json() == source.get(rec(99_999).id).to_json()

        assert copy_store(source, target).kinds["records"].copied == 0
        assert target.count() == 100_000
    finally:
        source.close()
        target.close()
    print(f"\n100k: built in {built - started:.1f}s, migrated in {time.monotonic() - built:.1f}s")


def test_a_target_holding_other_traffic_fails_the_count_check(
    tmp_path: Path, postgres_url: str
) -> None:
    source = SQLiteStore(tmp_path / "a.sqlite3")
    target = PostgresStore(postgres_url)
    try:
        source.insert_many([rec(i) for i in range(5)])
        target.insert(rec(77))
        with pytest.raises(MigrationIncomplete, match="source holds 5 records and the target 6"):
            copy_store(source, target)
    finally:
        source.close()
        target.close()


def test_a_store_is_never_copied_into_itself(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.sqlite3")
    try:
        with pytest.raises(MigrationSameDatabase):
            copy_store(store, SQLiteStore(tmp_path / "." / "a.sqlite3"))
    finally:
        store.close()
    same = [
        "postgresql://reef:pw@127.0.0.1:5432/reef",
        "postgres://other@localhost/reef",
        "postgresql:///reef?host=localhost&port=5432",
    ]
    assert len({identity(u) for u in same}) == 1
    assert identity("postgresql://reef@localhost:5433/reef") != identity(same[0])


def test_a_connection_lost_mid_copy_is_one_error_and_a_rerun_finishes(
    tmp_path: Path, postgres_url: str
) -> None:
    import psycopg

    source = SQLiteStore(tmp_path / "a.sqlite3")
    fill(source, 5 * BATCH)
    target = PostgresStore(postgres_url)

    def kill_the_target_connections(kind: str, done: int, total: int) -> None:
        if kind == "records" and done == 2 * BATCH:
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )

    try:
        with pytest.raises(MigrationIncomplete, match="the copy stopped after 2000 records"):
            copy_store(source, target, progress=kill_the_target_connections)
    finally:
        target.close()
    target = PostgresStore(postgres_url)
    try:
        assert target.count() == 2 * BATCH
        records = copy_store(source, target).kinds["records"]
        assert (records.present, records.copied, target.count()) == (2000, 3000, 5000)
    finally:
        source.close()
        target.close()

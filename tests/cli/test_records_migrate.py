"""`reef records migrate` through the real CLI: SQLite into PostgreSQL with equal counts,
a second run copies nothing, and bad targets are one-line errors with a non-zero exit."""

from __future__ import annotations

from pathlib import Path

from reef_cli.core.records import HarvestedSession, Record, db_path
from reef_cli.core.store import ReportRow, open_store
from tests.cli.helpers import reef, reef_fails, reef_json


def seed(n: int = 1500) -> list[Record]:
    rows = [
        Record(
            id=f"rec_{i:024x}",
            scenario="demo",
            client_dialect="openai",
            upstream_dialect="openai",
            request={"i": i},
            created_at=f"2026-01-01T00:00:{i // 1000:02d}.{i % 1000:03d}000Z",
        )
        for i in range(n)
    ]
    store = open_store()
    try:
        store.insert_many(rows)
        store.put_report(
            ReportRow("rep_1", "demo", 1.0, None, [rows[0].id], None, "h", rows[0].created_at)
        )
        store.upsert_harvested([HarvestedSession(agent="pi", session_id="s1", path="/p")])
        store.save_job({"id": "job_1", "scenario": "demo", "state": "succeeded"})
        store.save_mark("demo", "skillclaw", {"sessions": {"session:s1": "fp"}})
    finally:
        store.close()
    return rows


def test_migrate_copies_the_current_store_into_postgresql(postgres_url: str) -> None:
    rows = seed()
    out = reef("records", "migrate", "--to", postgres_url)
    assert "records: 1500 copied, 0 already there" in out
    assert "reports: 1 copied" in out and "jobs: 1 copied" in out and "marks: 1 copied" in out
    assert "counts match" in out
    target = open_store(postgres_url)
    try:
        assert target.count() == 1500 and target.report_count() == 1
        assert target.get(rows[-1].id).request == {"i": 1499}
        assert target.load_job("job_1") is not None and target.harvested()[0].session_id == "s1"
    finally:
        target.close()

    again = reef_json("records", "migrate", "--to", postgres_url)
    assert again["records"] == {"copied": 0, "present": 1500}
    assert again["reports"] == {"copied": 0, "present": 1}


def test_migrate_from_postgresql_into_a_sqlite_file(postgres_url: str, tmp_path: Path) -> None:
    seed(10)
    reef("records", "migrate", "--to", postgres_url)
    copy = tmp_path / "copy.sqlite3"
    out = reef_json("records", "migrate", "--from", postgres_url, "--to", f"sqlite:///{copy}")
    assert out["records"] == {"copied": 10, "present": 0}
    assert open_store(f"sqlite:///{copy}").count() == 10


def test_bad_targets_are_one_line_errors() -> None:
    seed(3)
    assert "neither postgresql://" in reef_fails(
        "records", "migrate", "--to", "mysql://x/y", code=2
    )
    same = reef_fails("records", "migrate", "--to", f"sqlite:///{db_path()}", code=2)
    assert "is the database the records come from" in same
    down = reef_fails(
        "records", "migrate", "--to", "postgresql://reef:s3cret@127.0.0.1:1/reef", code=3
    )
    assert "cannot use PostgreSQL" in down and "s3cret" not in down

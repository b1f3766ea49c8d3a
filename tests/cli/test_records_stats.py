"""`reef records stats` and `reef records evict` through the real CLI, on both backends:
sizes per scenario, what eviction keeps (referenced, cited), the configured budget."""

from __future__ import annotations

import pytest

from reef_cli.core import scenarios
from reef_cli.core.records import Record
from reef_cli.core.store import ReportRow, open_store
from reef_cli.core.tree import starter_tree
from tests.cli.helpers import reef, reef_json


def rec(n: int, scenario: str = "demo") -> Record:
    return Record(
        id=f"rec_{n:024x}",
        scenario=scenario,
        client_dialect="openai",
        upstream_dialect="openai",
        request={"n": n},
        response={"ok": True},
        created_at=f"2020-01-0{n + 1}T00:00:00.000000Z",
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "postgresql":
        monkeypatch.setenv("REEF_DATABASE_URL", request.getfixturevalue("postgres_url"))
    return request.param


def seed() -> list[Record]:
    rows = [rec(0), rec(1), rec(2), rec(3, scenario="other")]
    store = open_store()
    try:
        store.insert_many(rows)
        store.put_report(
            ReportRow("rep_1", "demo", 1.0, None, [rows[0].id], None, "h", rows[0].created_at)
        )
    finally:
        store.close()
    scenarios.create("demo").chain().publish(
        starter_tree().files(), extra={"evidence": {"receipts": [rows[1].id]}}
    )
    return rows


def test_stats_show_size_per_scenario_and_the_budget(backend: str, monkeypatch) -> None:
    rows = seed()
    monkeypatch.setenv("REEF_RECORDS_MAX_GB", "2.5")
    data = reef_json("records", "stats")
    assert data["store"]["kind"] == backend
    by_name = {s["scenario"]: s for s in data["scenarios"]}
    row_bytes = len('{"n":0}') + len('{"ok":true}')
    assert by_name["demo"] == {
        "scenario": "demo",
        "records": 3,
        "bytes": 3 * row_bytes,
        "oldest": rows[0].created_at,
        "newest": rows[2].created_at,
        "referenced": 1,
    }
    assert by_name["other"]["records"] == 1
    assert data["total"] == {"records": 4, "bytes": 4 * row_bytes, "referenced": 1, "cited": 1}
    assert data["budget"] == {"max_gb": 2.5, "max_age_days": None}

    text = reef("records", "stats")
    assert "demo" in text and "other" in text and "total" in text
    assert "1 referenced by reports, 1 cited by releases" in text
    assert "budget: 2.5 GB" in text


def test_stats_on_an_empty_store_say_no_budget() -> None:
    data = reef_json("records", "stats")
    assert data["scenarios"] == [] and data["total"]["records"] == 0
    assert "budget: none (reef config set records_max_gb" in reef("records", "stats")


def test_evict_applies_the_configured_age_keeping_evidence(backend: str, monkeypatch) -> None:
    rows = seed()
    assert reef("records", "evict").startswith("no records budget set")
    monkeypatch.setenv("REEF_RECORDS_MAX_AGE_DAYS", "30")
    assert reef("records", "evict").startswith("evicted 2 records")
    left = {r.id for r in open_store().iter()}
    assert left == {rows[0].id, rows[1].id}  # referenced by a report, cited by a release
    assert reef("records", "evict").startswith("evicted 0 records")


def test_evict_takes_a_one_off_size_budget() -> None:
    seed()
    assert reef("records", "evict", "--max-gb", "0").startswith("evicted 2 records")

"""Reports: validation that names the field, reference checks, idempotency by id."""

from __future__ import annotations

import pytest

from reef_cli.core.records import Record, new_receipt
from reef_cli.core.reports import (
    ReportConflict,
    ReportInvalid,
    StoredReport,
    list_reports,
    parse_report,
    save_report,
)
from reef_cli.core.store.sqlite import SQLiteStore


@pytest.fixture
def store(tmp_path):
    s = SQLiteStore(tmp_path / "r.sqlite3")
    return s


def _record(store, scenario="s"):
    rec = Record(
        id=new_receipt(), scenario=scenario, client_dialect="openai", upstream_dialect="openai"
    )
    store.insert(rec)
    return rec.id


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"score": True}, "score"),
        ({"score": float("nan")}, "score"),
        ({"score": float("inf")}, "score"),
        ({"score": "3"}, "score"),
        ({"score": 1, "references": ["x"]}, "references"),
        ({"score": 1, "references": ["rec_" + "a" * 24] * 300}, "references"),
        ({"score": 1, "extra": 1}, "extra"),
        ({"feedback": "y" * 70000}, "feedback"),
        ({"score": 1, "metadata": {"k": "v" * 20000}}, "metadata"),
        ({"score": 1, "id": "bad id!"}, "id"),
        ({}, "score"),
        ([], "body"),
    ],
)
def test_validation_names_the_field(body, field):
    with pytest.raises(ReportInvalid) as info:
        parse_report(body)
    assert info.value.field == field


def test_save_checks_references_and_is_idempotent(store):
    rec = _record(store)
    other = _record(store, "other")
    report = parse_report(
        {"score": 2, "feedback": {"why": "good"}, "references": [rec], "id": "r1"}
    )
    first = save_report(store, report, None)
    assert first.created and first.scenario == "s"
    again = save_report(store, report, None)
    assert not again.created and again.id == "r1"
    with pytest.raises(ReportConflict):
        save_report(store, parse_report({"score": 3, "references": [rec], "id": "r1"}), None)
    with pytest.raises(ReportInvalid, match="unknown receipt"):
        save_report(store, parse_report({"score": 1, "references": ["rec_" + "0" * 24]}), None)
    with pytest.raises(ReportInvalid, match="more than one scenario"):
        save_report(store, parse_report({"score": 1, "references": [rec, other]}), None)
    with pytest.raises(ReportInvalid, match="belongs to scenario"):
        save_report(store, parse_report({"score": 1, "references": [other]}), "s")
    stored = list_reports(store, record_id=rec)
    assert [r.id for r in stored] == ["r1"] and stored[0].feedback == {"why": "good"}


def test_a_stored_report_shows_its_fields_but_created() -> None:
    report = StoredReport("r1", "s", None, None, [], None, "2025-01-01T00:00:00Z", created=False)
    assert list(report.to_json().items()) == [
        ("id", "r1"),
        ("scenario", "s"),
        ("score", None),
        ("feedback", None),
        ("references", []),
        ("metadata", None),
        ("created_at", "2025-01-01T00:00:00Z"),
    ]

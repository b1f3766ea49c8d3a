"""The SQLite store's own parts: its named migrations upgrade an old file in place, WAL,
and the records module's old name for it. The behaviour both backends share is in
test_contract.py."""

from __future__ import annotations

import sqlite3

import pytest

from reef_cli.core.records import RawJSON, Record, RecordNotFound, new_receipt
from reef_cli.core.store.schema import MIGRATIONS, NAMES
from reef_cli.core.store.sqlite import SQLiteStore, connect


def _rec(**kw) -> Record:
    base = {
        "id": new_receipt(),
        "scenario": "s",
        "client_dialect": "openai",
        "upstream_dialect": "openai",
    }
    return Record(**(base | kw))


def test_migrations_are_named_and_applied_once(tmp_path):
    path = tmp_path / "r.sqlite3"
    conn = connect(path)
    names = [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY name")]
    assert names == list(NAMES)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    from reef_cli.core.store.sqlite import migrate

    assert migrate(sqlite3.connect(path)) == []  # nothing left to apply


def test_insert_get_list_sessions(tmp_path):
    store = SQLiteStore(tmp_path / "r.sqlite3")
    a = _rec(session_id="x", request={"model": "m"}, input_tokens=3, output_tokens=4)
    b = _rec(session_id="x", scenario="s", response=RawJSON('{"ok": true}'))
    c = _rec(scenario="other")
    store.insert_many([a, b, c])
    got = store.get(b.id)
    assert got.response == {"ok": True} and got.scenario == "s"
    assert store.get(a.id).request == {"model": "m"}
    assert [r.id for r in store.list(scenario="s")] == [b.id, a.id]  # newest first
    assert store.count() == 3 and store.latest("other").id == c.id
    assert store.exists([a.id, "rec_" + "f" * 24]) == {a.id: "s"}
    sessions = store.sessions()
    assert sessions[0]["session_id"] == "x" and sessions[0]["records"] == 2
    assert sessions[0]["input_tokens"] == 3
    with pytest.raises(RecordNotFound):
        store.get("rec_" + "0" * 24)


def test_a_failed_batch_leaves_no_partial_rows(tmp_path):
    store = SQLiteStore(tmp_path / "r.sqlite3")
    good = _rec()
    bad = _rec(request={"x": object()})  # not JSON-serialisable: the batch fails whole
    with pytest.raises(TypeError):
        store.insert_many([good, bad])
    assert store.count() == 0


# ---------------------------------------------------------------- harvested sessions


def _harvested(session_id: str, **kw):
    from reef_cli.core.records import HarvestedSession

    base = {
        "agent": "pi",
        "session_id": session_id,
        "path": f"/t/{session_id}.jsonl",
        "turns": [{"role": "user", "text": "hi", "tool_calls": []}],
        "skills_used": ["s"],
        "receipts": ["rec_1"],
        "ended_at": "2026-01-01T00:00:00Z",
    }
    return HarvestedSession(**(base | kw))


def test_harvested_migration_upgrades_an_existing_database(tmp_path):
    from reef_cli.core.store import sqlite as records

    path = tmp_path / "old.sqlite3"
    old = sqlite3.connect(path, isolation_level=None)
    old.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    for migration in MIGRATIONS[:2]:
        for statement in migration.statements("sqlite"):
            old.execute(statement)
        old.execute("INSERT INTO schema_migrations VALUES (?, 'x')", (migration.name,))
    old.execute(
        "INSERT INTO records (id, scenario, client_dialect, upstream_dialect, created_at) "
        "VALUES ('rec_old', 's', 'openai', 'openai', '2025')"
    )
    old.close()
    assert records.migrate(sqlite3.connect(path, isolation_level=None)) == [
        "0003_harvested_sessions",
        "0004_record_state_and_release_source",
        "0005_weight_version_and_tokens",
        "0006_records_created_at",
        "0007_jobs_and_marks",
        "0008_records_tags",
    ]
    store = SQLiteStore(path)
    assert store.get("rec_old").scenario == "s"  # existing data untouched
    assert store.harvested() == []


def test_upsert_harvested_replaces_by_agent_and_session(tmp_path):
    store = SQLiteStore(tmp_path / "r.sqlite3")
    assert store.upsert_harvested([_harvested("a"), _harvested("b", agent="claude-code")]) == 2
    assert store.upsert_harvested([_harvested("a", skills_used=["t"], model="m")]) == 1
    # The same session id under another agent is another row.
    store.upsert_harvested([_harvested("b", agent="pi", ended_at="2027-01-01T00:00:00Z")])
    rows = store.harvested()
    assert [(r.agent, r.session_id) for r in rows] == [
        ("pi", "b"),  # newest ended_at first; ties: the row stored last first
        ("claude-code", "b"),
        ("pi", "a"),  # an update keeps the row's place
    ]
    a = store.harvested(agent="pi", session_id="a")
    assert len(a) == 1 and a[0].skills_used == ["t"] and a[0].model == "m"
    assert a[0].turns == [{"role": "user", "text": "hi", "tool_calls": []}]
    assert len(store.harvested(limit=1)) == 1
    # record_session_id finds it too (pi's REEF_SESSION_ID).
    store.upsert_harvested([_harvested("c", record_session_id="reef-sess")])
    assert [r.session_id for r in store.harvested(session_id="reef-sess")] == ["c"]
    assert store.upsert_harvested([]) == 0


def test_upsert_harvested_is_all_or_nothing(tmp_path):
    store = SQLiteStore(tmp_path / "r.sqlite3")
    store.upsert_harvested([_harvested("a")])
    broken = _harvested("b", path=None)  # violates NOT NULL after "c" was written
    with pytest.raises(sqlite3.IntegrityError):
        store.upsert_harvested([_harvested("c"), broken, _harvested("a", model="new")])
    rows = store.harvested()
    assert [r.session_id for r in rows] == ["a"] and rows[0].model is None


def test_sessions_by_id(tmp_path):
    store = SQLiteStore(tmp_path / "r.sqlite3")
    store.insert_many([_rec(session_id="x", input_tokens=2), _rec(session_id="y")])
    rows = store.sessions_by_id(["x", "nope"])
    assert [(r["session_id"], r["records"], r["input_tokens"]) for r in rows] == [("x", 1, 2)]
    assert store.sessions_by_id([]) == []

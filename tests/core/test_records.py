"""The records store: named migrations, whole-row inserts, queries, sessions."""

from __future__ import annotations

import sqlite3

import pytest

from reef_cli.core.records import (
    MIGRATIONS,
    RawJSON,
    Record,
    RecordNotFound,
    RecordStore,
    connect,
    new_receipt,
)


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
    assert names == [name for name, _ in MIGRATIONS]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    from reef_cli.core.records import migrate

    assert migrate(sqlite3.connect(path)) == []  # nothing left to apply


def test_insert_get_list_sessions(tmp_path):
    store = RecordStore(tmp_path / "r.sqlite3")
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
    store = RecordStore(tmp_path / "r.sqlite3")
    good = _rec()
    bad = _rec(request={"x": object()})  # not JSON-serialisable: the batch fails whole
    with pytest.raises(TypeError):
        store.insert_many([good, bad])
    assert store.count() == 0

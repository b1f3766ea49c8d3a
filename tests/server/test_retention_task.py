"""`reef serve`'s retention thread: with a budget set it evicts what core.retention says
may go; with none it does nothing; while another replica holds the lock it waits."""

from __future__ import annotations

from reef_cli.core.records import Record, new_receipt
from reef_cli.core.retention import LOCK_KEY
from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.server.retention_task import RetentionTask


def old_and_new(store: SQLiteStore) -> tuple[Record, Record]:
    old = Record(new_receipt(), "s", "openai", "openai", created_at="2020-01-01T00:00:00.000000Z")
    new = Record(new_receipt(), "s", "openai", "openai")
    store.insert_many([old, new])
    return old, new


def test_no_budget_evicts_nothing() -> None:
    store = SQLiteStore()
    old_and_new(store)
    RetentionTask(store).run_once()
    assert store.count() == 2


def test_an_age_budget_evicts_the_old_records(monkeypatch) -> None:
    monkeypatch.setenv("REEF_RECORDS_MAX_AGE_DAYS", "30")
    store = SQLiteStore()
    _old, new = old_and_new(store)
    task = RetentionTask(store)
    with SQLiteStore().exclusive(LOCK_KEY) as held:  # another replica is evicting
        assert held
        task.run_once()
    assert store.count() == 2
    task.run_once()
    assert [r.id for r in store.iter()] == [new.id] and task.runs == 2

"""A lookup of what another replica wrote waits a little on a shared store (its batch may
not have landed yet) and not at all on SQLite."""

from __future__ import annotations

import asyncio
import threading

import pytest

from reef_cli.core.records import Record, new_receipt
from reef_cli.core.store.postgres import PostgresStore
from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.server import replicas


def test_a_record_that_lands_a_moment_later_is_found(postgres_url) -> None:
    store = PostgresStore(postgres_url)
    try:
        rec = Record(new_receipt(), "s", "openai", "openai")
        writer = threading.Timer(0.2, store.insert, args=(rec,))  # the other replica's batch
        writer.start()
        found = asyncio.run(
            replicas.read_until(store, lambda: store.exists([rec.id]), bool, store.exists([rec.id]))
        )
        assert found == {rec.id: "s"}
        writer.join()
    finally:
        store.close()


def test_what_never_lands_is_given_up_on(postgres_url, monkeypatch) -> None:
    monkeypatch.setattr(replicas, "WAIT_S", 0.3)
    store = PostgresStore(postgres_url)
    try:
        calls = []

        def read() -> dict[str, str]:
            calls.append(1)
            return store.exists([new_receipt()])

        assert asyncio.run(replicas.read_until(store, read, bool, {})) == {}
        assert len(calls) >= 2
    finally:
        store.close()


@pytest.mark.parametrize("first", [{}, {"rec_x": "s"}])
def test_sqlite_and_a_found_answer_are_read_once(first) -> None:
    store = SQLiteStore()

    def read() -> dict[str, str]:
        raise AssertionError("no second read")

    assert asyncio.run(replicas.read_until(store, read, bool, first)) == first

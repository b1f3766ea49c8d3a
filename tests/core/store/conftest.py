"""``store``: each contract test runs once on SQLite and once on a real PostgreSQL (a
throwaway cluster the tests start; tests/fakes/postgres.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reef_cli.core.store import Store
from reef_cli.core.store.sqlite import SQLiteStore

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened = open_backend(request, request.param, tmp_path)
    try:
        yield opened
    finally:
        opened.close()


def open_backend(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> Store:
    if kind == "sqlite":
        return SQLiteStore(tmp_path / "records.sqlite3")
    from reef_cli.core.store.postgres import PostgresStore

    return PostgresStore(request.getfixturevalue("postgres_url"))

"""Every test gets its own empty state dir (REEF_HOME) and no REEF_* or OTEL_* settings
from outside, except the embedded model: tests run on the lite one (SmolLM2), whatever the
machine's memory would pick (tests that check the choice itself unset it)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.postgres import PostgresCluster, PostgresMissing
from tests.fakes.scripted import Scripted


@pytest.fixture(autouse=True)
def reef_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in list(os.environ):
        if key.startswith(("REEF_", "OTEL_")):  # OTEL_*: no test exports traces by accident
            monkeypatch.delenv(key)
    home = tmp_path / "reef-home"
    monkeypatch.setenv("REEF_HOME", str(home))
    monkeypatch.setenv("REEF_EMBEDDED_MODEL", "smollm2-135m")
    return home


@pytest.fixture
def scripted() -> Iterator[Scripted]:
    """A scripted OpenAI-compatible model on a real loopback port (tests/fakes/scripted.py)."""
    model = Scripted()
    with model.server:
        yield model


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """One throwaway PostgreSQL cluster for the whole run (tests/fakes/postgres.py), started
    on first use. Missing PostgreSQL skips the test, except under CI, where it fails."""
    try:
        import psycopg  # noqa: F401

        cluster = PostgresCluster.start()
    except (PostgresMissing, ImportError) as exc:
        if os.environ.get("CI"):
            pytest.fail(f"{exc}: install PostgreSQL (./install.sh --dev)", pytrace=False)
        pytest.skip(f"{exc} (fix: ./install.sh --dev)")
    try:
        yield cluster
    finally:
        cluster.stop()


_databases = itertools.count(1)


@pytest.fixture
def postgres_url(postgres: PostgresCluster) -> Iterator[str]:
    """A fresh, empty database on the session's cluster, dropped after the test."""
    name = f"test_{next(_databases)}"
    yield postgres.create_database(name)
    postgres.drop_database(name)

"""``open_store``: the URL picks the backend; a URL Reef cannot use is a one-line error at
once (never a silent fall back to SQLite), and a password never shows."""

from __future__ import annotations

import subprocess
import sys

import pytest

from reef_cli.core.store import DatabaseUnreachable, DatabaseURLInvalid, open_store
from reef_cli.core.store.postgres import PostgresStore
from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.core.store_url import shown_url
from tests.fakes.postgres import free_port


def test_no_url_is_the_sqlite_file_in_the_state_dir(reef_home) -> None:
    store = open_store()
    assert isinstance(store, SQLiteStore) and store.path == reef_home / "records.sqlite3"


def test_a_sqlite_url_names_the_file(tmp_path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'x.sqlite3'}")
    assert isinstance(store, SQLiteStore) and store.path == tmp_path / "x.sqlite3"


def test_the_environment_wins_over_the_setting(postgres_url, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("REEF_DATABASE_URL", postgres_url)
    store = open_store(configured=f"sqlite:///{tmp_path / 'ignored.sqlite3'}")
    try:
        assert isinstance(store, PostgresStore) and store.kind == "postgresql"
    finally:
        store.close()
    assert not (tmp_path / "ignored.sqlite3").exists()


@pytest.mark.parametrize(
    "url", ["mysql://u@h/db", "sqlite://relative.db", "sqlite:///", "just-a-word", "http://x"]
)
def test_a_url_of_no_known_kind_is_refused(url) -> None:
    with pytest.raises(DatabaseURLInvalid) as caught:
        open_store(url)
    assert "postgresql://" in caught.value.one_line()


def test_an_unreachable_server_is_one_line_without_the_password() -> None:
    url = f"postgresql://reef:s3cret-pw@127.0.0.1:{free_port()}/reef"
    with pytest.raises(DatabaseUnreachable) as caught:
        PostgresStore(url, connect_timeout=2)
    line = caught.value.one_line()
    assert "s3cret-pw" not in line and "***" in line and "127.0.0.1" in line
    assert "\n" not in line


def test_a_wrong_database_name_says_so(postgres) -> None:
    with pytest.raises(DatabaseUnreachable) as caught:
        open_store(postgres.url_for("no_such_db"))
    assert "no_such_db" in caught.value.one_line()


def test_shown_url_hides_only_the_password() -> None:
    assert shown_url("postgresql://u:p@h:5432/d") == "postgresql://u:***@h:5432/d"
    assert shown_url("postgresql://u@h/d") == "postgresql://u@h/d"


def test_the_cli_exits_with_the_error_and_no_traceback(reef_home, monkeypatch) -> None:
    env = {"REEF_HOME": str(reef_home), "PATH": "/usr/bin:/bin"}
    for url, code in (("mysql://x/y", 2), (f"postgresql://u:pw1@127.0.0.1:{free_port()}/d", 3)):
        done = subprocess.run(
            [sys.executable, "-m", "reef_cli", "records", "list"],
            env={**env, "REEF_DATABASE_URL": url},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == code, done.stderr
        assert "Traceback" not in done.stderr and "pw1" not in done.stderr
        assert done.stderr.startswith("reef: error:") and len(done.stderr.splitlines()) == 1
    assert not (reef_home / "records.sqlite3").exists()  # no silent SQLite fall back

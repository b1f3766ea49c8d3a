"""The state dir is private: 0700, files 0600, an old loose one tightened at start."""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from reef_cli.core import paths
from reef_cli.core.records import Record
from reef_cli.core.store.sqlite import SQLiteStore


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def loose_entries(root: Path) -> list[str]:
    """Every entry under ``root`` (root included) that gives group or others any access."""
    found = []
    for entry in [root, *root.rglob("*")]:
        if entry.is_symlink():
            continue
        if mode(entry) & 0o077:
            found.append(f"{entry.relative_to(root.parent)} {mode(entry):o}")
    return found


@pytest.fixture
def person_umask(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A process as the person starts it: the common 022 umask, not yet tightened by Reef
    (an earlier test in this process may have tightened it)."""
    before = os.umask(0o022)
    monkeypatch.setattr(paths, "_person_umask", None)
    yield 0o022
    os.umask(before)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, person_umask: int) -> Path:
    root = tmp_path / "reef-home"
    monkeypatch.setenv("REEF_HOME", str(root))
    monkeypatch.delenv("REEF_TOKEN", raising=False)
    return root


def test_state_dir_lookup_makes_new_files_private(home: Path) -> None:
    paths.state_dir()
    assert paths.person_umask() == 0o022
    current = os.umask(0)
    os.umask(current)
    assert current == 0o077
    created = home.parent / "made-after"
    created.write_text("x")
    assert mode(created) == 0o600


def test_ensure_state_dir_creates_it_0700(home: Path) -> None:
    root = paths.ensure_state_dir()
    assert root == home and mode(root) == 0o700


def test_loose_state_dir_is_tightened_at_start(
    home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # As an older Reef (umask 022) left it.
    (home / "scenarios" / "web").mkdir(parents=True)
    for d in (home, home / "scenarios", home / "scenarios" / "web"):
        d.chmod(0o755)
    (home / "records.sqlite3").write_text("")
    (home / "records.sqlite3").chmod(0o644)
    hook = home / "scenarios" / "web" / "hook"
    hook.write_text("#!/bin/sh\n")
    hook.chmod(0o755)
    outside = tmp_path / "outside.txt"
    outside.write_text("not ours")
    outside.chmod(0o644)
    (home / "link").symlink_to(outside)

    with caplog.at_level(logging.WARNING, logger="reef.paths"):
        paths.ensure_state_dir()
    assert loose_entries(home) == []
    assert mode(hook) == 0o700  # the owner's bits are kept
    assert mode(outside) == 0o644  # a symlink's target is not ours to change
    assert "made it private" in caplog.text and str(home) in caplog.text

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="reef.paths"):
        paths.ensure_state_dir()  # already private: no walk, nothing said
    assert caplog.text == ""


def test_records_database_and_its_wal_are_0600(home: Path) -> None:
    store = SQLiteStore()
    store.insert(Record("rec_" + "a" * 24, "web", "openai", "openai"))
    db = home / "records.sqlite3"
    names = sorted(p.name for p in home.iterdir())
    assert {"records.sqlite3", "records.sqlite3-wal", "records.sqlite3-shm"} <= set(names)
    assert loose_entries(home) == [], names
    assert sqlite3.connect(db).execute("SELECT count(*) FROM records").fetchone() == (1,)


def test_records_database_elsewhere_is_private_too(tmp_path: Path, person_umask: int) -> None:
    path = tmp_path / "elsewhere" / "db" / "records.sqlite3"
    SQLiteStore(path).insert(Record("rec_" + "b" * 24, "web", "openai", "openai"))
    assert mode(path) == 0o600 and mode(path.parent) == 0o700


def test_symlinked_state_dir_is_tightened_at_its_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, person_umask: int
) -> None:
    real = tmp_path / "data" / "reef"
    real.mkdir(parents=True)
    real.chmod(0o755)
    (real / "config.toml").write_text("")
    (real / "config.toml").chmod(0o644)
    link = tmp_path / "reef-home"
    link.symlink_to(real)
    monkeypatch.setenv("REEF_HOME", str(link))
    paths.ensure_state_dir()
    assert loose_entries(real) == []

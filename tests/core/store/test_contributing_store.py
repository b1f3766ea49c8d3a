"""A store added as CONTRIBUTING.md shows it works: the page's module (``scratch_store``,
written to a folder first on the path), its opener and its row in ``BACKENDS`` (the page's
edits, applied to the text of ``reef_cli/core/store/__init__.py``) open ``scratch://``: a
store that keeps the store contract and the one schema, shared by the processes its maker
starts and gone when its maker exits.

No file of Reef's is touched: in this process the edited ``__init__.py`` runs as a module
of its own beside Reef's; the CLI runs in fresh processes on a copy of ``reef_cli`` that has
the edited file, first on the path. Reef as it is refuses ``scratch://`` in one line."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from reef_cli.core.store import DatabaseURLInvalid, Store, open_store, schema
from reef_cli.core.store.sqlite import SQLiteStore
from tests.contributing import edits, examples
from tests.core.store import test_contract as contract
from tests.core.store.test_contract import rec

REEF = Path(__file__).resolve().parents[3]
INIT = "reef_cli/core/store/__init__.py"
MODULE = "scratch_store"
URL = "scratch://"
SHOWN = ("postgresql://…", "sqlite:///…", "scratch://")  # the rows, the page's last


def _apply(lines: list[str], where: str, name: str, body: str) -> list[str]:
    """``lines`` with ``body`` put where the page says: ``above BACKENDS`` above the table,
    ``in BACKENDS`` before its closing parenthesis."""
    added = body.rstrip("\n").split("\n")
    start = next((i for i, ln in enumerate(lines) if ln.startswith(f"{name}:")), None)
    assert start is not None, f"{name} is not where the page's edit goes"
    if where == "above":
        return [*lines[:start], *added, "", "", *lines[start:]]
    end = lines.index(")", start)
    return [*lines[:end], *added, *lines[end:]]


def edited_init() -> str:
    """Reef's ``reef_cli/core/store/__init__.py`` with the page's two edits."""
    shown = edits("reef_cli/core/store/")
    assert [(path, where, name) for path, where, name, _ in shown] == [
        (INIT, "above", "BACKENDS"),
        (INIT, "in", "BACKENDS"),
    ]
    lines = (REEF / INIT).read_text().split("\n")
    for _, where, name, body in shown:
        lines = _apply(lines, where, name, body)
    return "\n".join(lines)


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The page's module, written to a folder first on the path; the temp dir every
    scratch folder is made in (this process's and the ones it starts); no folder inherited."""
    site = tmp_path / "site"
    files = examples(f"{MODULE}/")
    assert f"{MODULE}/__init__.py" in files, sorted(files)
    for path, body in files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(body)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(REEF)]))
    sys.modules.pop(MODULE, None)
    page = importlib.import_module(MODULE)
    assert Path(page.__file__ or "").is_relative_to(site)
    monkeypatch.setenv(page.ENV, "")  # none inherited; set by the first open, undone after
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setenv("TMPDIR", str(folder))
    yield folder
    sys.modules.pop(MODULE, None)


@pytest.fixture
def edited(temp: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The edited ``__init__.py``, run as a module of its own (Reef's stays as it is)."""
    module = ModuleType("reef_store_edited")
    module.__file__ = str(REEF / INIT)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(edited_init(), f"{INIT} (edited)", "exec"), module.__dict__)
    return module


@pytest.fixture
def scratch(edited: ModuleType) -> Iterator[Store]:
    opened: Store = edited.open_store(URL)
    try:
        yield opened
    finally:
        opened.close()


def test_reef_as_it_is_refuses_scratch_in_one_line() -> None:
    with pytest.raises(DatabaseURLInvalid) as caught:
        open_store(URL)
    line = caught.value.one_line()
    assert "'scratch://' is neither postgresql://… nor sqlite:///…" in line
    assert "\n" not in line


def test_the_edits_open_a_scratch_store_with_the_one_schema(
    edited: ModuleType, temp: Path, tmp_path: Path
) -> None:
    assert tuple(b.shown for b in edited.BACKENDS) == SHOWN
    opened = edited.open_store(URL)
    try:
        assert isinstance(opened, SQLiteStore) and type(opened).__module__ == MODULE
        assert opened.kind == "scratch" and opened.path.name == "records.sqlite3"
        assert opened.path.parent.parent == temp  # a folder of its own in the temp dir
        assert opened.path.parent.stat().st_mode & 0o077 == 0  # private
        names = opened.conn.execute("SELECT name FROM schema_migrations ORDER BY name")
        assert tuple(row[0] for row in names) == schema.NAMES
        assert opened.count() == 0  # it starts empty
    finally:
        opened.close()
    plain = edited.open_store(f"sqlite:///{tmp_path / 'x.sqlite3'}")  # the other rows stay
    assert type(plain) is SQLiteStore and plain.path == tmp_path / "x.sqlite3"
    plain.close()


@pytest.mark.parametrize("url", ["mysql://u@h/db", "scratch://here", "scratch:"])
def test_a_url_no_row_takes_is_one_line_naming_every_row(edited: ModuleType, url: str) -> None:
    for opener, rows in ((open_store, SHOWN[:2]), (edited.open_store, SHOWN)):
        with pytest.raises(DatabaseURLInvalid) as caught:
            opener(url)
        line = caught.value.one_line()
        assert f"{url!r} is neither {' nor '.join(rows)} (fix:" in line and "\n" not in line


def _takes_a_store_only(check: Callable[..., Any]) -> bool:
    return list(inspect.signature(check).parameters) == ["store"]


CONTRACT = {
    name: check
    for name, check in vars(contract).items()
    if name.startswith("test_") and callable(check) and _takes_a_store_only(check)
}


def test_the_contract_run_here_is_all_of_it_but_two() -> None:
    """Each test of the contract that needs only a store runs on ``scratch://``; the other
    two open a second store by kind, or the jobs module's (the state dir's files on every
    SQLite store): the test below checks what sharing a folder does for locks."""
    every = {name for name in vars(contract) if name.startswith("test_")}
    assert sorted(every - set(CONTRACT)) == [
        "test_exclusive_holds_against_other_holders_and_dies_with_its_process",
        "test_the_jobs_module_uses_the_configured_store",
    ]
    assert len(CONTRACT) >= 16


@pytest.mark.parametrize("name", sorted(CONTRACT))
def test_the_store_contract_holds(name: str, scratch: Store) -> None:
    CONTRACT[name](scratch)


def test_the_stores_of_one_process_share_its_folder_its_records_and_its_locks(
    edited: ModuleType,
) -> None:
    a, b = edited.open_store(URL), edited.open_store(URL)
    try:
        assert a.path == b.path
        record = rec()
        a.insert(record)
        assert b.get(record.id).id == record.id
        with a.exclusive("live-loop:s") as held, b.exclusive("live-loop:s") as also:
            assert held and not also
        a.close()  # closing a store keeps the folder: its maker's exit removes it
        assert b.count() == 1 and b.path.is_file()
    finally:
        b.close()


# ------------------------------------------------------------------ through the CLI


@pytest.fixture
def reef_copy(temp: Path, tmp_path: Path) -> dict[str, str]:
    """The environment of a fresh process on a copy of ``reef_cli`` with the edited
    ``__init__.py``, the page's module and ``REEF_DATABASE_URL=scratch://``."""
    copy = tmp_path / "reef"
    shutil.copytree(
        REEF / "reef_cli", copy / "reef_cli", ignore=shutil.ignore_patterns("__pycache__")
    )
    (copy / INIT).write_text(edited_init())
    site = os.environ["PYTHONPATH"].split(os.pathsep)[0]
    path = os.pathsep.join([site, str(copy), str(REEF)])
    return {**os.environ, "PYTHONPATH": path, "REEF_DATABASE_URL": URL}


def run(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A fresh Python (``cwd`` away from Reef's tree, whose ``reef_cli`` would come first)."""
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd
    )


def test_reef_records_stats_names_the_store_and_leaves_no_folder(
    reef_copy: dict[str, str], temp: Path, tmp_path: Path
) -> None:
    done = run(reef_copy, tmp_path, "-m", "reef_cli", "records", "stats", "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["store"]["kind"] == "scratch" and shown["total"]["records"] == 0
    assert shown["store"]["url"].startswith(f"sqlite:///{temp}/reef-scratch-")
    assert list(temp.iterdir()) == []  # gone with the process that made it
    # Reef as it is: the same command is refused in one line, and makes no folder
    as_is = {**reef_copy, "PYTHONPATH": os.environ["PYTHONPATH"]}
    refused = run(as_is, tmp_path, "-m", "reef_cli", "records", "stats")
    assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1, refused.stderr
    assert "'scratch://' is neither postgresql://… nor sqlite:///…" in refused.stderr
    # with the edits, a URL no row takes names the new row too
    reef_copy["REEF_DATABASE_URL"] = "mysql://u@h/db"
    refused = run(reef_copy, tmp_path, "-m", "reef_cli", "records", "stats")
    assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1, refused.stderr
    assert "is neither postgresql://… nor sqlite:///… nor scratch://" in refused.stderr
    assert list(temp.iterdir()) == []


# records one exchange, asks a child `reef records stats` what it sees, says where it is kept
MAKER = """
import json, subprocess, sys
from reef_cli.core.records import Record, new_receipt
from reef_cli.core.store import open_store
store = open_store()
store.insert(Record(id=new_receipt(), scenario="s", client_dialect="openai",
                    upstream_dialect="openai", created_at="2026-01-01T00:00:00.000000Z"))
child = subprocess.run([sys.executable, "-m", "reef_cli", "records", "stats", "--json"],
                       capture_output=True, text=True, check=True)
kept = store.path.is_file() and store.count() == 1  # the child's exit left it
print(json.dumps({"url": store.url, "child": json.loads(child.stdout), "kept": kept}))
"""


def test_the_processes_its_maker_starts_share_the_folder_and_its_exit_removes_it(
    reef_copy: dict[str, str], temp: Path, tmp_path: Path
) -> None:
    done = run(reef_copy, tmp_path, "-c", MAKER)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["url"].startswith(f"sqlite:///{temp}/reef-scratch-")
    assert found["child"]["store"] == {"kind": "scratch", "url": found["url"]}
    scenarios = {s["scenario"]: s["records"] for s in found["child"]["scenarios"]}
    assert scenarios == {"s": 1} and found["kept"]  # what its maker recorded, still there
    assert list(temp.iterdir()) == []  # the maker's exit removed it, the child's did not

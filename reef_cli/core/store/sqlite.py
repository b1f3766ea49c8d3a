"""The SQLite store: the embedded default, one file (WAL) in the state dir.

One connection per thread (SQLite connections are not shared between threads); writes
take the database lock up front (``BEGIN IMMEDIATE``) so a writer never fails half-way on
a busy lock. Jobs and recipe marks stay the JSON files they always were (``jobs/``,
``scenarios/<S>/<mark>.json``): one machine reads them, and people look at them.
Locks (:meth:`SQLiteStore.exclusive`) are ``flock``s, so they hold between the processes
sharing this state dir and die with their holder.
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import hashlib
import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from reef_cli.core import paths
from reef_cli.core.errors import StateError
from reef_cli.core.fsutil import atomic_write_text, read_json_object, stat_key
from reef_cli.core.records import db_path
from reef_cli.core.store import schema
from reef_cli.core.store.base import JOURNAL_DIR_NAME
from reef_cli.core.store.sql import Row, SQLStore, json_path


def connect(path: Path) -> sqlite3.Connection:
    """Open (and migrate) the database at ``path``: WAL, NORMAL sync, a busy timeout.

    The file is created 0600 in a 0700 directory (it holds every prompt); SQLite gives
    its -wal and -shm files the database file's mode."""
    try:
        if path.parent == paths.state_dir():
            paths.ensure_state_dir()
        else:
            paths.ensure_private_dir(path.parent)
        paths.private_file(path)
        # no statement cache: a cached statement keeps a copy of the values last bound to
        # it and of the row last read, so every thread's connection held megabytes of past
        # answers (~100 MiB after 500 answers of 1 MiB); preparing one costs microseconds
        conn = sqlite3.connect(
            path,
            timeout=30.0,
            isolation_level=None,
            check_same_thread=False,
            cached_statements=0,
        )
    except (OSError, sqlite3.Error) as exc:
        raise StateError(
            f"cannot open the records database {path}: {exc}", "set REEF_HOME to a writable dir"
        ) from exc
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=30000")
    migrate(conn)
    return conn


_migrate_lock = threading.Lock()


class _SQLiteTx:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def run(self, sql: str, args: Sequence[Any] = ()) -> int:
        return self.conn.execute(sql, args).rowcount

    def rows(self, sql: str, args: Sequence[Any] = ()) -> builtins.list[Row]:
        return self.conn.execute(sql, args).fetchall()

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[_SQLiteTx]:
    """Take the write lock up front: a writer never fails half-way on a busy lock."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield _SQLiteTx(conn)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Bring the file to the one schema (``schema.py``); return the names applied now."""
    with _migrate_lock:
        return schema.migrate(lambda: _transaction(conn), "sqlite")


_JOB_ID = re.compile(r"^job_[0-9A-Za-z]+$")


class SQLiteStore(SQLStore):
    """The store in one SQLite file (``path``; default ``<state dir>/records.sqlite3``)."""

    kind = "sqlite"

    def _tag_equals(self, name: str, value: str) -> tuple[str, builtins.list[Any]]:
        return "json_extract(r.tags, ?) = ?", [json_path(name), value]

    ORDER = "rowid"
    SIZE = (
        "COALESCE(LENGTH(CAST(r.request AS BLOB)), 0)"
        " + COALESCE(LENGTH(CAST(r.response AS BLOB)), 0)"
    )

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or db_path()
        self.url = f"sqlite:///{self.path}"
        self.journal_dir = self.path.parent / JOURNAL_DIR_NAME
        self._local = threading.local()
        connect(self.path).close()  # create + migrate once, up front

    def reopen_url(self) -> str | None:
        return self.url

    @property
    def conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            self._local.conn = conn
        return conn

    def close(self) -> None:
        """Close this thread's connection (each thread opens its own on first use)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def release_thread(self) -> None:
        self.close()

    def _transaction(self) -> contextlib.AbstractContextManager[_SQLiteTx]:
        return _transaction(self.conn)

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> builtins.list[Row]:
        return self.conn.execute(sql, args).fetchall()

    # ------------------------------------------------------------ jobs: jobs/<id>.json

    @property
    def _jobs_dir(self) -> Path:
        return paths.state_dir() / "jobs"

    def save_job(self, data: dict[str, Any]) -> None:
        job_id = str(data["id"])
        if not _JOB_ID.match(job_id):
            raise ValueError(f"not a job id: {job_id!r}")
        paths.ensure_state_dir()
        paths.ensure_private_dir(self._jobs_dir)
        text = json.dumps(data, indent=2, default=str) + "\n"
        atomic_write_text(self._jobs_dir / f"{job_id}.json", text)

    def load_job(self, job_id: str) -> dict[str, Any] | None:
        if not _JOB_ID.match(job_id):
            return None
        try:
            data = json.loads((self._jobs_dir / f"{job_id}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        return data if isinstance(data, dict) else None

    def jobs(self, *, active_only: bool = False) -> builtins.list[dict[str, Any]]:
        if not self._jobs_dir.is_dir():
            return []
        out = []
        for path in sorted(self._jobs_dir.glob("job_*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (ValueError, OSError, RecursionError):
                continue
            if not isinstance(data, dict):
                continue
            if active_only and data.get("state") not in ("queued", "running"):
                continue
            out.append(data)
        out.sort(key=lambda d: str(d.get("created_at") or ""))
        return out

    # ------------------------------------------------------------ marks: scenarios/<S>/<name>.json

    @staticmethod
    def _mark_path(scenario: str, name: str) -> Path:
        return paths.scenarios_dir() / scenario / f"{name}.json"

    def load_mark(self, scenario: str, name: str) -> dict[str, Any] | None:
        data = read_json_object(self._mark_path(scenario, name))
        return data or None

    def save_mark(self, scenario: str, name: str, data: dict[str, Any]) -> None:
        text = json.dumps(data, indent=1, sort_keys=True) + "\n"
        atomic_write_text(self._mark_path(scenario, name), text, 0o600)

    def mark_version(self, scenario: str, name: str) -> Any:
        return stat_key(self._mark_path(scenario, name))

    def marks(self) -> builtins.list[tuple[str, str, dict[str, Any]]]:
        root = paths.scenarios_dir()
        if not root.is_dir():
            return []
        out = []
        for path in sorted(root.glob("*/*.json")):
            data = read_json_object(path)
            if isinstance(data.get("sessions"), dict):
                out.append((path.parent.name, path.stem, data))
        return out

    # ------------------------------------------------------------ locks: flock

    @contextlib.contextmanager
    def exclusive(self, key: str) -> Iterator[bool]:
        folder = paths.ensure_private_dir(self.path.parent / "locks")
        name = hashlib.sha256(key.encode()).hexdigest()[:24]
        fd = os.open(folder / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

"""Where Reef keeps records, reports, harvested sessions, jobs and marks.

    store = open_store()            # REEF_DATABASE_URL / database_url, else SQLite
    store.insert(record); store.get(receipt); store.put_report(row) ...

``open_store`` picks the backend from the URL (``BACKENDS``, a row each): none (the
embedded default, one SQLite file in the state dir), ``sqlite:///ABS/PATH``, or
``postgresql://…`` (a team's shared database; needs the ``postgres`` extra). A URL it
cannot use is an error at once, never a silent fall back to SQLite. :class:`Store`
(``base.py``) is the interface; ``sql.py`` holds the queries both backends share,
``schema.py`` the schema (one list of named migrations) both apply.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reef_cli.core.errors import ExtraMissing
from reef_cli.core.store.base import (
    DatabaseUnreachable,
    DatabaseURLInvalid,
    Evicted,
    ReportRow,
    ScenarioSize,
    Store,
)
from reef_cli.core.store_url import (
    ENV,
    POSTGRES_SCHEMES,
    postgres_problem,
    scheme_of,
    shown_url,
    sqlite_path,
)

if TYPE_CHECKING:
    from reef_cli.core.store.sqlite import SQLiteStore

__all__ = [
    "DatabaseURLInvalid",
    "DatabaseUnreachable",
    "Evicted",
    "ReportRow",
    "ScenarioSize",
    "Store",
    "database_url",
    "open_store",
    "shared",
    "sqlite_store",
]


def database_url(configured: str | None = None) -> str | None:
    """The database to use: ``$REEF_DATABASE_URL``, else ``configured`` (serve.yaml's
    ``database_url``), else the ``database_url`` setting; None means the SQLite default."""
    from_env = os.environ.get(ENV, "").strip()
    if from_env:
        return from_env
    if configured and configured.strip():
        return configured.strip()
    from reef_cli.core.config import load_settings

    setting = load_settings().database_url
    return setting.strip() if setting and setting.strip() else None


def sqlite_store(path: Path | None = None) -> SQLiteStore:
    from reef_cli.core.store.sqlite import SQLiteStore

    return SQLiteStore(path)


def _open_postgres(url: str) -> Store:
    problem = postgres_problem(url)
    if problem is not None:
        raise DatabaseURLInvalid(
            f"database URL {_quoted(url)} cannot be used: {problem}",
            "set REEF_DATABASE_URL (or database_url) to "
            "postgresql://USER:PASSWORD@HOST:5432/DB, or unset it for the SQLite store",
        )
    try:
        from reef_cli.core.store.postgres import PostgresStore
    except ImportError as exc:
        raise ExtraMissing(
            f"REEF_DATABASE_URL names PostgreSQL, but psycopg is not installed ({exc.name})",
            "pip install 'reef[postgres]' (or ./install.sh --dev)",
        ) from None
    return PostgresStore(url)


def _open_sqlite(url: str) -> Store:
    return sqlite_store(Path(str(sqlite_path(url))))


@dataclass(frozen=True)
class Backend:
    """A store backend: the URLs it takes (``shown``: how an error names them) and how it
    opens one. A new backend is its module (``Store``, ``base.py``) and one row."""

    shown: str
    takes: Callable[[str], bool]
    open: Callable[[str], Store]


BACKENDS: tuple[Backend, ...] = (
    Backend("postgresql://…", lambda url: scheme_of(url) in POSTGRES_SCHEMES, _open_postgres),
    Backend("sqlite:///…", lambda url: sqlite_path(url) is not None, _open_sqlite),
)


def open_store(url: str | None = None, *, configured: str | None = None) -> Store:
    """The store ``url`` names; ``None``: :func:`database_url` (``configured`` is
    serve.yaml's ``database_url``), and with none set, the SQLite file in the state dir."""
    url = url if url is not None else database_url(configured)
    if not url:
        return sqlite_store()
    for backend in BACKENDS:
        if backend.takes(url):
            return backend.open(url)
    raise DatabaseURLInvalid(
        f"database URL {_quoted(url)} is neither {' nor '.join(b.shown for b in BACKENDS)}",
        "set REEF_DATABASE_URL (or database_url) to postgresql://USER:PASSWORD@HOST:5432/DB, "
        "or unset it for the embedded SQLite store",
    )


def _quoted(url: str) -> str:
    """``url`` as a message may show it: without its password, cut to a short line."""
    if "password" in url.lower():
        return "a URL with a password"
    shown = repr(shown_url(url))
    return shown if len(shown) <= 100 else shown[:99] + "…"


_shared: dict[tuple[str, str], Store] = {}
_shared_lock = threading.Lock()


def shared() -> Store:
    """One store per database and state dir for this process, for code that has none
    handed to it (the jobs module): opening a PostgreSQL pool per call would cost a
    connection each time."""
    from reef_cli.core import paths

    key = (database_url() or "", str(paths.state_dir()))
    with _shared_lock:
        store = _shared.get(key)
        if store is None:
            store = _shared[key] = open_store(key[0] or None)
        return store

"""Answers of the embedded model at temperature 0, kept so that no question is asked twice.

Greedy decoding on the embedded model is a function of its input: the same messages,
model file, decoding settings and llama.cpp build give the same answer (what the A/A
controls in docs/results.md measure: 14 of 14 answers identical). So a task's answer on a
tree is computed once and reused by every evaluation that asks it again — the served
release scored once for a run, a GEPA candidate re-scored on the validation set after
its minibatch, a second `reef eval` of the same releases. The score is recomputed from
the answer each time (scoring is cheap, and a change to a scorer takes effect at once);
a judge's answer is an embedded call too, and is cached the same way.

The key is content-addressed: the sha256 of the messages, ``max_tokens``, the schema and
:func:`reef_cli.core.embedded_engine.identity` (model name, its file's pinned sha256,
the repeat penalty, the context size, the llama-cpp-python version). A change to any of
them is a different key; nothing is ever invalidated by hand. Hosted models are not
cached: their temperature 0 is not deterministic, and a provider changes a model behind
its name.

The cache is one SQLite file in the state dir (``cache/answers.sqlite3``, private like
everything there), safe for several processes, bounded to :data:`MAX_ENTRIES` answers
(the least recently used go first). A cache that cannot be read — corrupt, locked too
long, on a full disk — is never an error: the call goes to the model, with one warning.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("reef.answer_cache")

SCHEMA_VERSION = 1
MAX_ENTRIES = 20_000  # about 20 MB of answers at 1 kB each
_warned: set[str] = set()
_lock = threading.Lock()


@dataclass(frozen=True)
class Cached:
    text: str
    prompt_tokens: int
    completion_tokens: int
    model: str


def cache_file() -> Path:
    from reef_cli.core.paths import state_dir

    return state_dir() / "cache" / "answers.sqlite3"


def key(identity: dict[str, Any], request: dict[str, Any]) -> str:
    """The content address of one call: what the engine is and what it was asked."""
    body = json.dumps(
        {"v": SCHEMA_VERSION, "engine": identity, "request": request},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


@contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    from reef_cli.core.paths import ensure_private_dir

    ensure_private_dir(path.parent)
    db = sqlite3.connect(path, timeout=5.0, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(
            "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, text TEXT NOT NULL, "
            "prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, "
            "model TEXT NOT NULL, used INTEGER NOT NULL)"
        )
        yield db
    finally:
        db.close()


def _warn_once(path: Path, exc: Exception) -> None:
    with _lock:
        if str(path) in _warned:
            return
        _warned.add(str(path))
    log.warning(
        "reef: the answer cache %s cannot be used (%s): answering without it "
        "(fix: delete the file; it is rebuilt)",
        path,
        exc,
    )


def get(address: str, path: Path | None = None) -> Cached | None:
    """The answer stored under ``address``, or None (also when the cache is unusable)."""
    path = path or cache_file()
    if not path.exists():
        return None
    try:
        with _connect(path) as db:
            row = db.execute(
                "SELECT text, prompt_tokens, completion_tokens, model FROM answers WHERE key = ?",
                (address,),
            ).fetchone()
            if row is None:
                return None
            db.execute("UPDATE answers SET used = ? WHERE key = ?", (time.time_ns(), address))
    except (sqlite3.Error, OSError) as exc:
        _warn_once(path, exc)
        return None
    return Cached(str(row[0]), int(row[1]), int(row[2]), str(row[3]))


def put(address: str, answer: Cached, path: Path | None = None) -> None:
    """Store ``answer`` under ``address`` (replacing one there), then drop the least
    recently used answers beyond :data:`MAX_ENTRIES`."""
    path = path or cache_file()
    try:
        with _connect(path) as db:
            db.execute(
                "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?)",
                (
                    address,
                    answer.text,
                    answer.prompt_tokens,
                    answer.completion_tokens,
                    answer.model,
                    time.time_ns(),
                ),
            )
            (count,) = db.execute("SELECT COUNT(*) FROM answers").fetchone()
            if count > MAX_ENTRIES:
                db.execute(
                    "DELETE FROM answers WHERE key IN "
                    "(SELECT key FROM answers ORDER BY used LIMIT ?)",
                    (count - MAX_ENTRIES,),
                )
    except (sqlite3.Error, OSError) as exc:
        _warn_once(path, exc)


def size(path: Path | None = None) -> int:
    """How many answers are stored (0 when there is no usable cache)."""
    path = path or cache_file()
    if not path.exists():
        return 0
    try:
        with _connect(path) as db:
            return int(db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])
    except (sqlite3.Error, OSError):
        return 0

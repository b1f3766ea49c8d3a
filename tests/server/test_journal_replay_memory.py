"""Journal replay at start-up holds about one exchange, never the whole journal (issue 23
item 3): a crash after a heavy burst must not make the next start hold all it left."""

from __future__ import annotations

import gc
import json
import os
import sqlite3
import tracemalloc
from pathlib import Path

from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.server import journal
from reef_cli.server.recorder import Exchange, Recorder

EXCHANGES = 48
SIZE = 512 * 1024  # the text of each answer
CHUNKS = 16  # a streamed answer's pieces
REQ = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()


def _answer(i: int) -> bytes:
    message = {"role": "assistant", "content": chr(97 + i % 26) * SIZE}
    return json.dumps({"choices": [{"index": 0, "message": message}]}).encode()


def _chunk(text: str) -> bytes:
    delta = {"choices": [{"index": 0, "delta": {"content": text}}]}
    return b"data: " + json.dumps(delta).encode() + b"\n\n"


def _ex(i: int) -> Exchange:
    return Exchange(
        id=f"rec_{i:024x}",
        scenario="s",
        release_id=1,
        client_dialect="openai",
        upstream_dialect="openai",
        request=REQ,
    )


def _dead_journal(tmp_path: Path) -> dict[str, str]:
    """A journal left by a process that died before storing anything: whole answers,
    finished streams and streams cut off, interleaved. Returns receipt -> expected state."""
    dead = Recorder(SQLiteStore(tmp_path / "records.sqlite3"))  # never started
    expected: dict[str, str] = {}
    for i in range(EXCHANGES):
        ex = _ex(i)
        if i % 3 == 0:
            ex.status, ex.body = 200, _answer(i)
            dead.submit(ex)
            expected[ex.id] = "complete"
            continue
        dead.open_stream(ex)
        piece = chr(97 + i % 26) * (SIZE // CHUNKS)
        for _ in range(CHUNKS):
            dead.chunk(ex, _chunk(piece))
        if i % 3 == 1:
            dead.chunk(ex, b"data: [DONE]\n\n")
            ex.status = 200
            dead.submit(ex)
            expected[ex.id] = "complete"
        else:
            expected[ex.id] = "interrupted"
    assert dead.journal is not None
    for seg in dead.journal._segments:  # what SIGKILL does: fds and locks go, files stay
        os.close(seg.fd)
    return expected


def test_replay_holds_about_one_exchange_not_the_journal(tmp_path: Path) -> None:
    expected = _dead_journal(tmp_path)
    segments = list((tmp_path / journal.DIR_NAME).glob("*.seg"))
    total = sum(p.stat().st_size for p in segments)
    one = total / EXCHANGES
    assert len(segments) > 1 and total > 20 * 1024 * 1024  # several segments, ~24 MB
    store = SQLiteStore(tmp_path / "records.sqlite3")
    fresh = Recorder(store)
    gc.collect()
    tracemalloc.start()
    try:
        replayed = fresh.replay()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert replayed == EXCHANGES
    # every receipt resolves, with its whole answer
    assert store.states(list(expected)) == expected
    for i in (0, 1, 2):
        rec = store.get(f"rec_{i:024x}")
        assert len(rec.response["choices"][0]["message"]["content"]) == SIZE
    assert list((tmp_path / journal.DIR_NAME).glob("*.seg")) == []
    # peak: a small multiple of one exchange (assembling a streamed answer alone takes
    # ~5x its size); the old replay held the whole journal at once, and more
    assert peak < 8 * one, (peak, one, total)
    assert peak / total < 0.2, (peak, total)


def test_a_segment_that_cannot_be_stored_is_kept_and_the_others_are_released(
    tmp_path: Path, monkeypatch
) -> None:
    """Replay releases each segment once its exchanges are stored; one whose exchange the
    store refuses stays for the next start (its receipt must not be lost)."""
    monkeypatch.setattr(journal, "SEGMENT_BYTES", 1024)
    db = tmp_path / "records.sqlite3"
    dead = Recorder(SQLiteStore(db))
    ids = []
    for i in range(6):
        ex = _ex(i)
        ex.status, ex.body = 200, json.dumps({"choices": [], "n": "x" * 2000}).encode()
        dead.submit(ex)
        ids.append(ex.id)
    assert dead.journal is not None
    for seg in dead.journal._segments:
        os.close(seg.fd)
    before = sorted((tmp_path / journal.DIR_NAME).glob("*.seg"))
    assert len(before) == 6  # one exchange per segment
    store = SQLiteStore(db)
    with sqlite3.connect(db) as conn:  # the real store refuses one row (a constraint)
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON records WHEN NEW.id = "
            f"'{ids[3]}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
    assert Recorder(store).replay() == 6
    assert sorted((tmp_path / journal.DIR_NAME).glob("*.seg")) == [before[3]]
    assert ids[3] not in store.states(ids)
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TRIGGER refuse")
    assert Recorder(store).replay() == 1  # the next start stores it
    assert set(store.states(ids).values()) == {"complete"}
    assert list((tmp_path / journal.DIR_NAME).glob("*.seg")) == []

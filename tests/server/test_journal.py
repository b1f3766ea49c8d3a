"""The receipt journal (items 10, 11): replay after a crash, torn tails, live owners, and a
stream's receipt that resolves (and takes a report) while the stream still runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx

from reef_cli.core.records import Record
from reef_cli.core.reports import list_reports
from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.server import journal
from reef_cli.server.receipts import RECORD_HEADER
from reef_cli.server.recorder import Exchange, Recorder
from tests.fakes.upstream import Turn
from tests.server.conftest import TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}"}
REQ = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
ANSWER = json.dumps(
    {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "yo"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }
).encode()


def _chunk(text: str) -> bytes:
    delta = {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": text}}],
    }
    return b"data: " + json.dumps(delta).encode() + b"\n\n"


def _ex(rid: str, **kw) -> Exchange:
    return Exchange(
        id=rid,
        scenario="s",
        release_id=2,
        client_dialect="openai",
        upstream_dialect="openai",
        request=REQ,
        served_release_id=3,
        **kw,
    )


def _die(rec: Recorder) -> None:
    """What SIGKILL does to the journal: the fds close, the locks go, the files stay."""
    assert rec.journal is not None
    for seg in rec.journal._segments:
        os.close(seg.fd)


def test_replay_restores_what_the_client_was_sent(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "records.sqlite3")
    dead = Recorder(store)  # never started: nothing reaches SQLite, as if killed at once
    whole = _ex("rec_" + "a" * 24)
    whole.status, whole.body = 200, ANSWER
    dead.submit(whole)
    done = _ex("rec_" + "b" * 24)
    dead.open_stream(done)
    dead.chunk(done, _chunk("he"))
    dead.chunk(done, _chunk("llo") + b"data: [DONE]\n\n")
    done.status = 200
    dead.submit(done)
    cut = _ex("rec_" + "c" * 24)
    dead.open_stream(cut)
    dead.chunk(cut, _chunk("partial "))
    _die(dead)

    fresh = Recorder(SQLiteStore(tmp_path / "records.sqlite3"))
    assert fresh.replay() == 3
    a = store.get(whole.id)
    assert (a.state, a.status, a.output_tokens, a.release_id) == ("complete", 200, 1, 2)
    assert a.served_release_id == 3 and a.request["model"] == "m"
    b = store.get(done.id)
    assert b.state == "complete" and b.response["choices"][0]["message"]["content"] == "hello"
    c = store.get(cut.id)
    assert c.state == "interrupted" and c.status is None and "interrupted" in (c.error or "")
    assert c.response["choices"][0]["message"]["content"] == "partial "
    assert list((tmp_path / journal.DIR_NAME).glob("*.seg")) == []  # replayed, removed
    assert fresh.replay() == 0


def test_replay_never_downgrades_and_skips_stored_records(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "records.sqlite3")
    dead = Recorder(store)
    ex = _ex("rec_" + "d" * 24)
    dead.open_stream(ex)
    _die(dead)
    store.insert(
        Record(
            id=ex.id,
            scenario="s",
            client_dialect="openai",
            upstream_dialect="openai",
            status=200,
            stream=True,
        )
    )
    assert Recorder(store).replay() == 0
    assert store.get(ex.id).state == "complete" and store.get(ex.id).status == 200
    # a late `streaming` row never replaces a finished one
    store.insert(
        Record(
            id=ex.id,
            scenario="s",
            client_dialect="openai",
            upstream_dialect="openai",
            state="streaming",
        )
    )
    assert store.get(ex.id).state == "complete"


def test_a_torn_tail_is_ignored_and_live_segments_are_left_alone(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "records.sqlite3")
    live = Recorder(store)
    mine = _ex("rec_" + "e" * 24)
    mine.status, mine.body = 200, ANSWER
    live.submit(mine)  # journaled by a process that is still alive (this one)
    assert Recorder(store).replay() == 0  # its segment is locked: not touched
    assert list((tmp_path / journal.DIR_NAME).glob("*.seg"))
    seg = live.journal._segments[0]  # type: ignore[union-attr]
    os.write(seg.fd, b'\x1erj 999 {"k":"X"')  # a write cut short by the crash
    _die(live)
    assert Recorder(store).replay() == 1
    assert store.get(mine.id).state == "complete"


def test_segments_rotate_and_are_removed_once_stored(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(journal, "SEGMENT_BYTES", 2048)
    store = SQLiteStore(tmp_path / "records.sqlite3")
    rec = Recorder(store, linger=0)
    rec.start()
    ids = []
    for i in range(40):
        ex = _ex(f"rec_{i:024x}")
        ex.status, ex.body = 200, ANSWER
        rec.submit(ex)
        ids.append(ex.id)
    assert rec.flush(10)
    rec.stop()
    assert set(store.states(ids).values()) == {"complete"}
    assert list((tmp_path / journal.DIR_NAME).glob("*.seg")) == []


def test_flush_waits_only_for_what_was_queued_before(tmp_path: Path) -> None:
    rec = Recorder(SQLiteStore(tmp_path / "records.sqlite3"), linger=0.05)
    rec.start()
    ex = _ex("rec_" + "f" * 24)
    ex.status, ex.body = 200, ANSWER
    rec.submit(ex)
    assert rec.flush(5)
    assert rec.store.states([ex.id]) == {ex.id: "complete"}
    rec.stop()


def test_report_on_a_stream_still_running(make_stack) -> None:
    """Item 11: the receipt of a running stream is real: it resolves and takes a report."""
    stack = make_stack("openai")
    stack.fake.push(Turn(text="one two three four", stall_mid=3.0))
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.stream(
        "POST", stack.url + "/v1/chat/completions", json=body, headers=AUTH, timeout=10
    ) as r:
        receipt = r.headers[RECORD_HEADER]
        chunks = r.iter_raw()
        next(chunks)  # the first chunk; the upstream now stalls
        rr = httpx.post(
            stack.url + "/reef/report",
            json={"score": 1, "feedback": "good so far", "references": [receipt]},
            headers=AUTH,
            timeout=10,
        )
        assert rr.status_code == 201, rr.text
        assert stack.store().get(receipt).state == "streaming"  # the stream still runs
        rest = b"".join(chunks)
    assert b"[DONE]" in rest
    stack.flush()
    rec = stack.store().get(receipt)
    assert rec.state == "complete" and rec.status == 200
    assert rec.response["choices"][0]["message"]["content"] == "one two three four"
    assert [r.references for r in list_reports(stack.store())] == [[receipt]]

"""The record writer process (record_writer.py, writer_process.py): records are stored by a
process apart from the server, which may die alone without losing a receipt."""

from __future__ import annotations

import io
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from reef_cli.core.store.postgres import PostgresStore
from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.server import journal
from reef_cli.server.receipts import RECORD_HEADER
from reef_cli.server.record_writer import Watch, Writer
from reef_cli.server.recorder import Exchange, _bytes, _end, _meta
from tests.fakes.upstream import Turn
from tests.server.conftest import TOKEN, Stack

AUTH = {"authorization": f"Bearer {TOKEN}"}


def _ask(client: httpx.Client, stack: Stack, n: int, stream: bool) -> str:
    body = {"model": "m", "messages": [{"role": "user", "content": f"q{n}"}], "stream": stream}
    r = client.post(stack.url + "/v1/chat/completions", json=body, headers=AUTH)
    r.raise_for_status()
    return r.headers[RECORD_HEADER]


def _until(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _new_writer(stack: Stack, old: int | None) -> bool:
    process = stack.app.state.recorder.process
    return process.restarts >= 1 and process.pid not in (None, old)


def test_killing_the_writer_alone_loses_no_receipt_and_recording_resumes(make_stack) -> None:
    stack = make_stack()
    process = stack.app.state.recorder.process
    assert process is not None and process.pid is not None  # reef serve's default
    receipts: list[str] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def load(worker: int) -> None:
        n = 0
        with httpx.Client(timeout=30) as client:
            while not stop.is_set():
                try:
                    receipts.append(_ask(client, stack, worker * 100000 + n, stream=n % 2 == 0))
                except BaseException as exc:  # any failure fails the test
                    errors.append(exc)
                    return
                n += 1

    threads = [threading.Thread(target=load, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    _until(lambda: len(receipts) >= 150, "load before the kill")
    killed = process.pid
    before = len(receipts)
    os.kill(killed, signal.SIGKILL)
    _until(lambda: _new_writer(stack, killed), "a new writer")
    _until(lambda: len(receipts) >= before + 150, "load after the kill")
    stop.set()
    for t in threads:
        t.join(30)
    assert not errors, errors[:3]  # serving went on while no writer was there
    stack.flush()

    store = stack.store()
    states = store.states(receipts)
    assert len(states) == len(set(receipts)) == len(receipts)
    assert set(states.values()) == {"complete"}
    assert store.count() == len(receipts)  # nothing written twice, nothing extra
    assert process.restarts == 1


def test_a_stream_open_when_the_writer_dies_is_recorded_whole(make_stack) -> None:
    stack = make_stack()
    words = "one two three four five six seven eight"
    stack.fake.push(Turn(text=words, pace=0.15))
    receipt: dict[str, str] = {}
    store = stack.store()

    def stream() -> None:
        body = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True}
        url = stack.url + "/v1/chat/completions"
        with httpx.stream("POST", url, json=body, headers=AUTH, timeout=30) as r:
            receipt["id"] = r.headers[RECORD_HEADER]  # at the headers, before the answer
            r.read()

    reader = threading.Thread(target=stream)
    reader.start()
    _until(lambda: "id" in receipt, "the stream's headers")
    _until(lambda: store.states([receipt["id"]]) == {receipt["id"]: "streaming"}, "its row")
    process = stack.app.state.recorder.process
    killed = process.pid
    os.kill(killed, signal.SIGKILL)
    assert reader.is_alive()  # killed mid-stream
    reader.join(30)
    _until(lambda: _new_writer(stack, killed), "a new writer")
    stack.flush()
    record = store.get(receipt["id"])
    assert record.state == "complete"
    assert record.response["choices"][0]["message"]["content"] == words


def test_the_thread_writes_what_the_journal_could_not_take(make_stack) -> None:
    stack = make_stack()
    recorder = stack.app.state.recorder
    with httpx.Client(timeout=30) as client:
        first = _ask(client, stack, 1, stream=False)
        stack.flush()
        # a write error (a disk gone read-only) breaks the journal; records still flow
        for seg in recorder.journal.live():
            os.close(seg.fd)
        late = [_ask(client, stack, n, stream=n % 2 == 0) for n in range(2, 8)]
    assert recorder.journal.broken
    stack.flush()
    assert recorder.written >= len(late)  # the thread stored them
    states = stack.store().states([first, *late])
    assert set(states.values()) == {"complete"} and len(states) == 7


def test_record_writer_thread_keeps_everything_in_the_server(make_stack) -> None:
    stack = make_stack(record_writer="thread")
    recorder = stack.app.state.recorder
    assert recorder.process is None
    with httpx.Client(timeout=30) as client:
        receipt = _ask(client, stack, 1, stream=True)
    stack.flush()
    assert stack.store().states([receipt]) == {receipt: "complete"}


def test_the_writer_process_records_to_postgresql(make_stack, postgres_url, monkeypatch) -> None:
    monkeypatch.setenv("REEF_DATABASE_URL", postgres_url)
    stack = make_stack()
    assert stack.app.state.recorder.process is not None
    with httpx.Client(timeout=30) as client:
        receipts = [_ask(client, stack, n, stream=n % 2 == 0) for n in range(12)]
    stack.flush()
    store = PostgresStore(postgres_url)
    try:
        assert store.states(receipts) == dict.fromkeys(receipts, "complete")
    finally:
        store.close()


# ------------------------------------------------------------ the writer, in this process


def _exchange(n: int, stream: bool = False) -> Exchange:
    request = json.dumps({"model": "m", "messages": [{"role": "user", "content": str(n)}]})
    ex = Exchange(
        id=f"rec_{n:04d}",
        scenario="default",
        release_id=None,
        client_dialect="openai",
        upstream_dialect="openai",
        request=request.encode(),
        stream=stream,
    )
    ex.status = 200
    ex.ended = ex.started + 0.01
    return ex


def _answer(text: str) -> bytes:
    message = {"role": "assistant", "content": text}
    return json.dumps({"choices": [{"index": 0, "message": message}]}).encode()


def _chunk(text: str) -> bytes:
    delta = {"choices": [{"index": 0, "delta": {"content": text}}]}
    return b"data: " + json.dumps(delta).encode() + b"\n\n"


class _Setup:
    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path / "journal"
        self.store = SQLiteStore(tmp_path / "records.sqlite3")
        self.journal = journal.Journal(self.root)
        self.seg = self.journal.current()
        assert self.seg is not None
        self.out = io.StringIO()

    def writer(self, verb: str = "seg") -> Writer:
        writer = Writer(self.store, self.root, self.out)
        writer.command(f"{verb} {self.seg.path.name}")
        return writer

    def whole(self, n: int, text: str) -> Exchange:
        ex = _exchange(n)
        ex.body = _answer(text)
        self.journal.begin(self.seg)
        meta = {**_meta(ex, "X"), **_end(ex, "X")}
        assert self.journal.append(self.seg, meta, _bytes(ex.request), ex.body)
        return ex

    def stream_start(self, n: int) -> Exchange:
        ex = _exchange(n, stream=True)
        ex.segment = self.seg
        self.journal.begin(self.seg)
        assert self.journal.append(self.seg, _meta(ex, "S"), _bytes(ex.request))
        return ex

    def report(self) -> dict[str, Any]:
        return json.loads(self.out.getvalue().splitlines()[-1])


def test_the_writer_stores_whole_entries_and_says_how_far(tmp_path: Path) -> None:
    s = _Setup(tmp_path)
    s.whole(1, "first")
    stream = s.stream_start(2)
    s.journal.append_chunk(s.seg, stream.id, _chunk("hel"))
    writer = s.writer()
    assert writer.step() == (True, False)
    assert s.store.states(["rec_0001", "rec_0002"]) == {
        "rec_0001": "complete",
        "rec_0002": "streaming",
    }
    name = s.seg.path.name
    assert s.report() == {"written": 2, "failed": 0, "segs": [[name, s.seg.size, 1]]}

    # an entry being written is not read until it is whole
    s.journal.append_chunk(s.seg, stream.id, _chunk("lo"))
    entry = journal._header(_end(stream, "E"), [])
    os.write(s.seg.fd, entry[:7])
    assert writer.step() == (False, False)
    os.write(s.seg.fd, entry[7:])
    assert writer.step() == (True, False)
    record = s.store.get("rec_0002")
    assert record.state == "complete"
    assert record.response["choices"][0]["message"]["content"] == "hello"
    size = os.fstat(s.seg.fd).st_size
    assert s.report() == {"written": 3, "failed": 0, "segs": [[name, size, 2]]}


def test_a_writer_after_a_crash_stores_only_what_is_missing(tmp_path: Path) -> None:
    s = _Setup(tmp_path)
    s.whole(1, "first")
    stream = s.stream_start(2)
    s.journal.append_chunk(s.seg, stream.id, _chunk("abc"))
    s.writer().step()  # the first writer stored these, then died
    s.journal.append(s.seg, _end(stream, "E"))
    s.whole(3, "third")

    again = s.writer("check")
    assert again.step() == (True, False)
    # the stream's end and the new exchange only: rec_0001 and the streaming row were there
    assert s.report()["written"] == 2
    assert s.report()["segs"][0][2] == 3  # all three exchanges are closed
    states = s.store.states(["rec_0001", "rec_0002", "rec_0003"])
    assert set(states.values()) == {"complete"}
    assert s.store.get("rec_0002").response["choices"][0]["message"]["content"] == "abc"


def test_the_writer_drops_a_segment_the_server_removed(tmp_path: Path) -> None:
    s = _Setup(tmp_path)
    s.whole(1, "x")
    writer = s.writer()
    writer.step()
    s.seg.path.unlink()
    writer.step()
    assert writer.tails == {}


@pytest.mark.parametrize("verb", ["seg", "check"])
def test_the_writer_ignores_names_that_are_not_segments(tmp_path: Path, verb: str) -> None:
    s = _Setup(tmp_path)
    writer = Writer(s.store, s.root, s.out)
    writer.command(f"{verb} ../records.sqlite3")
    writer.command(f"{verb} missing.seg")
    assert writer.tails == {}


def test_the_writer_ends_when_its_server_dies_though_its_input_stays_open(
    tmp_path: Path,
) -> None:
    """A process the server forked could keep the writer's input open after the server
    died; the writer sees its parent go and ends anyway (after storing what it can)."""
    store = SQLiteStore(tmp_path / "records.sqlite3")
    store.close()
    read_end, write_end = os.pipe()  # this test holds the write end open throughout
    server = (
        "import os, subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-m', 'reef_cli.server.record_writer',"
        f" '--journal', {str(tmp_path / 'journal')!r}, '--parent', str(os.getpid())],"
        f" stdin={read_end}, pass_fds=[{read_end}],"
        " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(p.pid, flush=True)\n"
    )
    os.write(write_end, f"store {store.url}\n".encode())
    started = subprocess.run(
        [sys.executable, "-c", server],
        pass_fds=[read_end],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    os.close(read_end)
    writer = int(started.stdout.split()[0])
    try:
        _until(lambda: not _alive(writer), "the writer to end", timeout=15)
    finally:
        os.close(write_end)
        if _alive(writer):
            os.kill(writer, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("seg x.seg\n", "the first line must be `store URL`"),
        ("", "the first line must be `store URL`"),
        ("store mysql://db/x\n", "database URL 'mysql://db/x' is neither"),
    ],
)
def test_a_writer_without_a_store_says_why_in_one_line(tmp_path: Path, given: str, said: str):
    done = subprocess.run(
        [sys.executable, "-m", "reef_cli.server.record_writer", "--journal", str(tmp_path)],
        input=given,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("reef serve (record writer): ") and said in line, line


def test_an_idle_writer_is_woken_by_the_journal_itself(tmp_path: Path) -> None:
    """inotify on the journal's directory: a write wakes the writer (no polling while
    idle), and once drained it sleeps again."""
    s = _Setup(tmp_path)
    watch = Watch.on(s.root)
    assert watch is not None
    assert select.select([watch.fd], [], [], 0)[0] == []
    s.whole(1, "wake up")
    assert select.select([watch.fd], [], [], 10)[0] == [watch.fd]
    watch.drain()
    assert select.select([watch.fd], [], [], 0)[0] == []
    os.close(watch.fd)


def test_without_a_journal_directory_there_is_no_watch(tmp_path: Path) -> None:
    assert Watch.on(tmp_path / "missing") is None  # the writer then looks every LINGER_S

"""The recorder's backlog is bounded by bytes (issue 23 item 3): when the records store
stalls (here: a real SQLite file whose write lock another connection holds), the bytes
waiting for it stop near ``max_record_backlog_bytes``; new inference requests get a 503
in the caller's dialect with Retry-After, sent nowhere and handed no receipt; every
exchange admitted before is stored once the store recovers, and requests succeed again."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from reef_cli.server.receipts import RECORD_HEADER
from tests.fakes.server_thread import ServerThread
from tests.fakes.upstream import FakeUpstream, Turn
from tests.server.conftest import ROUTE_BODIES, TOKEN
from tests.server.test_crash import ROOT, _free_port

AUTH = {"authorization": f"Bearer {TOKEN}", "anthropic-version": "2023-06-01"}
BOUND = 512 * 1024
ANSWER = Turn(text="word " * 12_000)  # ~60 KB an answer: the bound holds about eight


def _lock(db: Path) -> sqlite3.Connection:
    """Hold the store's write lock from another connection: its writer waits (busy). Taking
    it waits for a batch the writer is still committing (a clean-clone CI once found the
    lock held right after the warm-up's 1 MB answers and failed here, before any check)."""
    conn = sqlite3.connect(db, isolation_level=None, timeout=30)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def _refused(r: httpx.Response, path: str) -> str:
    assert r.status_code == 503, (r.status_code, r.text[:300])
    assert r.headers["retry-after"].isdigit()
    assert RECORD_HEADER not in r.headers  # no receipt handed out: nothing to resolve
    body = r.json()
    if path == "/v1/messages":
        assert body["type"] == "error"
    message = str(body["error"]["message"])
    assert "records store" in message and "max_record_backlog_bytes" in message
    assert "`reef doctor`" in message and "\n" not in message
    return message


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_stalled_store_bounds_the_backlog_and_loses_nothing(make_stack, stream) -> None:
    stack = make_stack("openai", fake=FakeUpstream(default=ANSWER), max_record_backlog_bytes=BOUND)
    recorder = stack.app.state.recorder
    db = stack.home / "records.sqlite3"
    client = httpx.Client(base_url=stack.url, headers=AUTH, timeout=30)
    path = "/v1/chat/completions"
    body = {**ROUTE_BODIES[path], "stream": stream}
    assert client.post(path, json=body).status_code == 200  # the store exists, warm
    stack.flush()
    admitted: list[str] = []
    lock = _lock(db)
    try:
        refused = None
        for _ in range(4 * BOUND // 60_000):  # four times what the bound holds
            r = client.post(path, json=body)
            if r.status_code != 200:
                refused = r
                break
            admitted.append(r.headers[RECORD_HEADER])
        assert refused is not None, "the backlog never reached its bound"
        assert "(max_record_backlog_bytes: 0.5 MiB)" in _refused(refused, path)
        backlog = recorder.backlog_bytes
        one = backlog / len(admitted)
        assert BOUND <= backlog < BOUND + 2 * one, (backlog, one)  # stopped at the bound
        sent = len(stack.fake.log)
        for each, each_body in ROUTE_BODIES.items():  # every dialect, whole and streamed
            for flag in (False, True):
                r = client.post(each, json={**each_body, "stream": flag})
                _refused(r, each)
        assert len(stack.fake.log) == sent  # refused before reaching the upstream
        assert recorder.backlog_bytes == backlog  # and before taking any memory
        marks = ",".join("?" * len(admitted))
        stored = lock.execute(f"SELECT count(*) FROM records WHERE id IN ({marks})", admitted)
        assert stored.fetchone() == (0,)  # the store really is stalled
    finally:
        lock.rollback()
        lock.close()
    stack.flush()
    assert recorder.backlog_bytes == 0
    assert set(stack.store().states(admitted).values()) == {"complete"}
    r = client.post(path, json=body)
    assert r.status_code == 200  # serving again
    stack.flush()
    assert stack.store().states([r.headers[RECORD_HEADER]]) == {
        r.headers[RECORD_HEADER]: "complete"
    }
    client.close()


def test_a_stream_admitted_before_the_bound_finishes_and_is_recorded(make_stack) -> None:
    """Back-pressure refuses new requests only: a stream already running when the
    backlog fills keeps streaming to its end, and its receipt resolves."""
    fake = FakeUpstream(default=ANSWER)
    stack = make_stack("openai", fake=fake, max_record_backlog_bytes=BOUND)
    recorder = stack.app.state.recorder
    client = httpx.Client(base_url=stack.url, headers=AUTH, timeout=30)
    path = "/v1/chat/completions"
    assert client.post(path, json=ROUTE_BODIES[path]).status_code == 200
    stack.flush()
    lock = _lock(stack.home / "records.sqlite3")
    try:
        fake.push(Turn(text="slow but sure", stall_mid=1.0))
        with httpx.stream(
            "POST",
            stack.url + path,
            json={**ROUTE_BODIES[path], "stream": True},
            headers=AUTH,
            timeout=30,
        ) as running:
            receipt = running.headers[RECORD_HEADER]
            parts = running.iter_raw()
            next(parts)  # it has begun; the upstream now pauses
            while not recorder.full:  # fill the backlog behind it
                assert client.post(path, json=ROUTE_BODIES[path]).status_code == 200
            _refused(client.post(path, json=ROUTE_BODIES[path]), path)
            rest = b"".join(parts)
        assert b"[DONE]" in rest and receipt.encode() in rest
    finally:
        lock.rollback()
        lock.close()
    stack.flush()
    rec = stack.store().get(receipt)
    assert rec.state == "complete" and rec.status == 200
    assert rec.response["choices"][0]["message"]["content"] == "slow but sure"
    client.close()


def test_the_bound_is_a_serve_yaml_key_and_a_flag(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from reef_cli.cli.main import app
    from reef_cli.server import serve_config as config

    path = tmp_path / "serve.yaml"
    path.write_text("max-record-backlog-bytes: 4096\n")
    assert config.build(config.load_file(path)).max_record_backlog_bytes == 4096
    assert config.build({}).max_record_backlog_bytes == 256 * 1024 * 1024
    with pytest.raises(config.ServeError, match="max_record_backlog_bytes"):
        config.build({"max_record_backlog_bytes": 10})
    help_text = CliRunner().invoke(app, ["serve", "--help"], terminal_width=200).output
    assert "--max-record-backlog-mb" in help_text


# ------------------------------------------------------------------ a real reef serve

SERVE = (
    "import sys\n"
    "from reef_cli.server.serve_config import ServeConfig\n"
    "from reef_cli.server.run import serve\n"
    "serve(ServeConfig(port=int(sys.argv[1]), upstream=sys.argv[2], upstream_dialect='openai',"
    " open=True, max_record_backlog_bytes=int(sys.argv[3])), announce=lambda s: None)\n"
)
MiB = 1024 * 1024


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_a_real_reef_serve_stays_within_the_bound_while_its_store_is_locked(
    tmp_path: Path,
) -> None:
    """`reef serve` in a child process, its SQLite file write-locked by this one, offered
    six times its backlog bound in 1 MB answers: its RSS grows by less than the bound plus
    8 MiB (measured: ~19 MiB for a 16 MiB bound; unbounded, it held all 96 answers: ~92 MiB),
    and nothing admitted is lost."""
    bound = 16 * MiB
    fake = FakeUpstream(default=Turn(text="word " * 200_000))  # ~1 MB an answer
    home = tmp_path / "home"
    with ServerThread(fake.app) as up:
        port = _free_port()
        env = {**os.environ, "REEF_HOME": str(home), "PYTHONPATH": str(ROOT)}
        env.pop("REEF_TOKEN", None)
        proc = subprocess.Popen(
            [sys.executable, "-c", SERVE, str(port), up.url + "/v1", str(bound)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
            for _ in range(600):
                try:
                    if client.get("/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert proc.poll() is None, "reef serve exited"
                time.sleep(0.1)
            body = ROUTE_BODIES["/v1/chat/completions"]
            for _ in range(8):  # warm: the allocator has seen answers of this size
                assert client.post("/v1/chat/completions", json=body).status_code == 200
            before = _rss(proc.pid)
            lock = _lock(home / "records.sqlite3")
            admitted, refused = [], 0
            try:
                for _ in range(6 * bound // MiB):
                    r = client.post("/v1/chat/completions", json=body)
                    if r.status_code == 200:
                        admitted.append(r.headers[RECORD_HEADER])
                    else:
                        assert r.status_code == 503, r.text[:300]
                        refused += 1
                grown = _rss(proc.pid) - before
            finally:
                lock.rollback()
                lock.close()
            assert refused > 0 and len(admitted) < 2 * bound // MiB, (len(admitted), refused)
            assert grown < bound + 8 * MiB, grown / MiB
            # the store is back: what was admitted is stored, new requests succeed
            for _ in range(600):
                r = client.post("/v1/chat/completions", json=body)
                if r.status_code == 200:
                    break
                assert r.status_code == 503
                time.sleep(0.1)
            assert r.status_code == 200
            client.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    from reef_cli.core.store.sqlite import SQLiteStore

    states = SQLiteStore(home / "records.sqlite3").states(admitted)
    assert set(states) == set(admitted) and set(states.values()) == {"complete"}

"""Item 10: a receipt a client has received resolves to a record after any crash.

A real `reef serve` in a child process, against the scripted upstream, under concurrent
load (plain answers and streams, some slow), is SIGKILLed mid-load and started again on
the same state dir. Every receipt the client saw must then have a record: ``complete``
for every answer the client received whole, ``complete`` or ``interrupted`` for a stream
cut off mid-way — never missing, never left ``streaming``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.server.receipts import RECORD_HEADER
from tests.fakes.server_thread import ServerThread
from tests.fakes.upstream import FakeUpstream, Turn

ROOT = Path(__file__).resolve().parents[2]
SERVE = (
    "import sys\n"
    "from reef_cli.server.serve_config import ServeConfig\n"
    "from reef_cli.server.run import serve\n"
    "serve(ServeConfig(port=int(sys.argv[1]), upstream=sys.argv[2], upstream_dialect='openai',"
    " open=True), announce=lambda s: None)\n"
)
REQUESTS = 600  # at most; the kill comes after KILL_AFTER of them are done
KILL_AFTER = 150
CONCURRENCY = 24


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(home: Path, upstream: str) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    env = {**os.environ, "REEF_HOME": str(home), "PYTHONPATH": str(ROOT)}
    env.pop("REEF_TOKEN", None)
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(port), upstream],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read().decode() if proc.stderr else "exited")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc, port
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("reef serve did not come up")


def test_sigkill_under_load_loses_no_received_receipt(tmp_path: Path) -> None:
    def chooser(path: str, body: dict) -> Turn:
        n = len(str(body))
        if body.get("stream") and n % 5 == 0:
            return Turn(text="slow words " * 5, stall_mid=0.3)  # still running at the kill
        return Turn(text="fine thanks, and you?")

    fake = FakeUpstream(chooser=chooser)
    home = tmp_path / "home"
    with ServerThread(fake.app) as up:
        proc, port = _start(home, up.url + "/v1")
        seen: dict[str, str] = {}  # receipt -> "whole" | "partial"
        done = 0
        killed = asyncio.Event()

        async def one(i: int, client: httpx.AsyncClient) -> None:
            nonlocal done
            stream = i % 3 != 0
            body = {
                "model": "m",
                "stream": stream,
                "messages": [{"role": "user", "content": f"q{i}"}],
            }
            receipt = None
            try:
                async with client.stream("POST", "/v1/chat/completions", json=body) as r:
                    receipt = r.headers.get(RECORD_HEADER)
                    if receipt:
                        seen[receipt] = "partial"
                    data = b""
                    async for part in r.aiter_raw():
                        data += part
                whole = r.status_code == 200 and (not stream or b"data: [DONE]" in data)
                if receipt and whole:
                    seen[receipt] = "whole"
            except httpx.HTTPError:
                return  # the kill cut it off
            done += 1
            if done == KILL_AFTER:
                killed.set()

        async def load() -> None:
            limits = httpx.Limits(max_connections=CONCURRENCY)
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", timeout=10, limits=limits
            ) as client:
                sem = asyncio.Semaphore(CONCURRENCY)

                async def gated(i: int) -> None:
                    if killed.is_set():
                        return
                    async with sem:
                        if not killed.is_set():
                            await one(i, client)

                tasks = [asyncio.create_task(gated(i)) for i in range(REQUESTS)]
                await asyncio.wait_for(killed.wait(), 60)
                await asyncio.sleep(0.05)  # more answers in flight, records still queued
                os.kill(proc.pid, signal.SIGKILL)
                await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 60)

        asyncio.run(load())
        proc.wait(10)
        if proc.stderr:
            proc.stderr.close()
        whole = {r for r, how in seen.items() if how == "whole"}
        assert len(whole) >= KILL_AFTER - CONCURRENCY, len(whole)

        proc, port = _start(home, up.url + "/v1")  # restart: replays the journal
        try:
            store = SQLiteStore(home / "records.sqlite3")
            states = store.states(list(seen))
            missing = sorted(set(seen) - set(states))
            assert not missing, f"{len(missing)} received receipt(s) without a record"
            for receipt in whole:
                assert states[receipt] == "complete", (receipt, states[receipt])
            for receipt in set(seen) - whole:
                assert states[receipt] in ("complete", "interrupted"), states[receipt]
            cut = [store.get(r) for r, s in states.items() if s == "interrupted"]
            for rec in cut:
                assert rec.stream and rec.error and "interrupted" in rec.error
                assert rec.request["messages"][0]["content"].startswith("q")
            # still serving, and the journal of the dead process is gone
            r = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "after"}]},
            )
            assert r.status_code == 200
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        assert store.get(r.headers[RECORD_HEADER]).state == "complete"
        leftover = list((home / "records-journal").glob("*.seg"))
        assert leftover == [], leftover

"""`reef serve` gives memory back: 500 large answers, then its RSS returns near its start.

A real `reef serve` child process (RSS is a process property) in front of the scripted
model (tests/fakes/upstream.py) answers 500 requests of ~1 MiB answers, four at a time,
in every client dialect and both ways: OpenAI chat (relayed), Anthropic messages
(translated), the Responses API (translated, with its conversation cache) and Responses
turns that continue an earlier one through ``previous_response_id``; streamed and not.
Its RSS (``VmRSS`` in /proc/PID/status) once it is idle must be back within 1.5x of the
baseline measured after a short warm-up of the same requests. Before the fix it held 4.6x
its baseline (121 -> 553 MiB): the recorder's last batch stayed referenced while it idled,
SQLite's statement cache kept copies of past rows in every thread's connection, and the
conversation cache weighed a turn by its request only. The bound is a ratio to the same
process's own baseline: nothing is timed.
"""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.replicas_rig import Replica
from tests.fakes.server_thread import ServerThread
from tests.fakes.upstream import FakeUpstream, Turn

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/status"),
]

TOKEN = "reef_soak_token_0123456789abcdef"
ANSWER_BYTES = 1 << 20
REQUESTS = 500
WARMUP = 16
CONCURRENCY = 4
BOUND = 1.5
MAX_ATTEMPTS = 24  # a request refused by back-pressure is sent again, at most this often
SHAPES = (
    "chat",
    "chat-stream",
    "anthropic",
    "anthropic-stream",
    "responses",
    "responses-stream",
    "responses-next",
    "responses-next-stream",
)
PATHS = {"chat": "/v1/chat/completions", "anthropic": "/v1/messages", "responses": "/v1/responses"}


def status_kib(pid: int, field: str) -> int:
    """A ``VmRSS``-style line of /proc/PID/status, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def request_for(shape: str, i: int, previous: list[str]) -> tuple[str, dict[str, Any]]:
    kind = shape.split("-")[0]
    stream = shape.endswith("-stream")
    question = f"q{i}: tell me everything"
    if kind == "responses":
        body: dict[str, Any] = {"model": "m", "input": question, "stream": stream}
        if "-next" in shape and previous:
            body["previous_response_id"] = random.Random(i).choice(previous[-8:])
        return PATHS[kind], body
    body = {"model": "m", "messages": [{"role": "user", "content": question}], "stream": stream}
    if kind == "anthropic":
        body["max_tokens"] = 64
    return PATHS[kind], body


async def drive(url: str, start: int, count: int, previous: list[str]) -> list[tuple[str, int]]:
    """Send ``count`` requests, ``CONCURRENCY`` at a time; (shape, status) of each, after
    checking that every 200 carried the whole answer. A 503 is back-pressure (the
    recorder's backlog reached its bound on a slow or busy disk, as on a loaded CI
    machine): the request waits its Retry-After and goes again, as a client should."""
    gate = asyncio.Semaphore(CONCURRENCY)
    headers = {"authorization": f"Bearer {TOKEN}", "anthropic-version": "2023-06-01"}
    seen: list[tuple[str, int]] = []
    refused: list[str] = []

    async def send(
        client: httpx.AsyncClient, path: str, body: dict[str, Any]
    ) -> tuple[httpx.Response, int]:
        if body["stream"]:
            size = 0
            async with client.stream("POST", url + path, json=body) as r:
                async for chunk in r.aiter_bytes():
                    size += len(chunk)
                return r, size
        r = await client.post(url + path, json=body)
        return r, len(r.content)

    async def one(client: httpx.AsyncClient, i: int) -> None:
        shape = SHAPES[i % len(SHAPES)]
        path, body = request_for(shape, i, previous)
        async with gate:
            for _attempt in range(MAX_ATTEMPTS):
                r, size = await send(client, path, body)
                if r.status_code != 503:
                    break
                # back-pressure: the recorder's backlog is full on a slow disk; a polite
                # client waits as told and sends again (the refused try left no record)
                refused.append(shape)
                await asyncio.sleep(float(r.headers["retry-after"]))
            status = r.status_code
            if status == 200 and shape == "responses":
                previous.append(r.json()["id"])
        if status == 200:
            assert size > ANSWER_BYTES, (shape, size)
        seen.append((shape, status))

    limits = httpx.Limits(max_connections=CONCURRENCY)
    async with httpx.AsyncClient(headers=headers, timeout=120, limits=limits) as client:
        await asyncio.gather(*(one(client, i) for i in range(start, start + count)))
    if refused:
        print(f"\n{len(refused)} tries refused with 503 + Retry-After (records backlog full)")
    return seen


def settle(replica: Replica, pid: int) -> int:
    """RSS (KiB) once the recorder has stored everything and the server is quiet: the
    lowest of a few readings a second apart, after the records are in."""
    replica.settle()
    readings = []
    for _ in range(4):
        time.sleep(1.0)  # idle: the background trim runs after a quiet second
        readings.append(status_kib(pid, "VmRSS"))
    return min(readings)


def test_rss_returns_to_its_warm_baseline_after_500_large_answers(tmp_path: Path) -> None:
    fake = FakeUpstream(default=Turn(text="word " * (ANSWER_BYTES // 5 + 1), chunks=32))
    upstream = ServerThread(fake.app).start()
    home = tmp_path / "reef-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REEF_", "MALLOC_"))}
    env.update(REEF_HOME=str(home), REEF_TOKEN=TOKEN, REEF_EMBEDDED_MODEL="smollm2-135m")
    replica = Replica._spawn(home, env, ["--upstream", upstream.url + "/v1"])
    pid = replica.proc.pid
    previous: list[str] = []
    try:
        warm = asyncio.run(drive(replica.url, 0, WARMUP, previous))
        assert all(status == 200 for _shape, status in warm), warm
        baseline = settle(replica, pid)
        fake.log.clear()

        seen = asyncio.run(drive(replica.url, WARMUP, REQUESTS, previous))
        fake.log.clear()
        assert [s for s in seen if s[1] != 200] == []
        assert {shape for shape, _ in seen} == set(SHAPES)
        peak = status_kib(pid, "VmHWM")
        after = settle(replica, pid)
        print(
            f"\nreef serve RSS: warm baseline {baseline / 1024:.0f} MiB, peak "
            f"{peak / 1024:.0f} MiB, after {REQUESTS} answers and idling "
            f"{after / 1024:.0f} MiB ({after / baseline:.2f}x)"
        )
        assert after <= BOUND * baseline, (
            f"RSS {after} KiB after idling vs {baseline} KiB warm ({after / baseline:.2f}x)"
        )
    finally:
        replica.stop()
        upstream.stop()
    with sqlite3.connect(home / "records.sqlite3") as db:
        rows = db.execute("SELECT count(*), sum(status = 200) FROM records").fetchone()
    assert rows == (WARMUP + REQUESTS, WARMUP + REQUESTS)  # every answer was recorded

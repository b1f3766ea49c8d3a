"""Replicas of `reef serve` as real child processes, and a round-robin load client.

    replica = Replica.start(home, upstream_url, database_url, token)   # .url, .kill(), .stop()
    result = asyncio.run(drive([a.url, b.url], requests=2000, token=token))

Each replica is ``reef serve --port P --upstream URL`` from this venv, with its own state
dir (``REEF_HOME``), the team's ``REEF_TOKEN`` and ``REEF_DATABASE_URL``, and no other
``REEF_*`` setting from the test run. Its output goes to ``serve.log`` beside its state
dir, quoted when it fails to start.

``drive`` sends requests in four shapes (OpenAI chat and Anthropic messages, each plain
and streamed) round-robin over the replicas that are up, ``concurrency`` at a time, and
after each answer a ``POST /reef/report`` for its receipt to the *next* replica, with a
report id so a retry after a dropped connection is idempotent. What every client saw is
kept: the receipt from the header, the one in the stream's receipt event, whether the
answer arrived whole, and each report's outcome.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from reef_cli.server.receipts import RECORD_HEADER, RELEASE_HEADER
from tests.fakes.postgres import free_port

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 90.0  # seconds for a replica to answer /healthz on a loaded 2-core machine
SHAPES = ("chat", "chat-stream", "anthropic", "anthropic-stream")


def reef_binary() -> Path:
    """The `reef` console script of the venv running the tests."""
    beside = Path(sys.executable).parent / "reef"
    return beside if beside.exists() else ROOT / ".venv" / "bin" / "reef"


def wait_for(predicate: Callable[[], Any], what: str, deadline_s: float = 60.0) -> Any:
    """Poll ``predicate`` until it is truthy; fail naming ``what`` (a deadline, not a
    timed assertion: it only bounds a hang)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@dataclass
class Replica:
    """One `reef serve` child process on its own state dir."""

    home: Path
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path
    env: dict[str, str]
    args: list[str]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @classmethod
    def start(
        cls,
        home: Path,
        upstream: str,
        database_url: str,
        token: str,
        *extra: str,
        env: dict[str, str] | None = None,
    ) -> Replica:
        """Start it on a free port and wait until /healthz answers."""
        base = {k: v for k, v in os.environ.items() if not k.startswith("REEF_")}
        base.update(
            REEF_HOME=str(home),
            REEF_TOKEN=token,
            REEF_DATABASE_URL=database_url,
            REEF_EMBEDDED_MODEL="smollm2-135m",
            **(env or {}),
        )
        args = ["--upstream", upstream, *extra]
        return cls._spawn(home, base, args)

    @classmethod
    def _spawn(cls, home: Path, env: dict[str, str], args: list[str]) -> Replica:
        home.mkdir(parents=True, exist_ok=True)
        log_path = home.parent / f"{home.name}-serve.log"
        port = free_port()
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [str(reef_binary()), "serve", "--port", str(port), *args],
                env=env,
                cwd=str(home.parent),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        replica = cls(home, port, proc, log_path, env, args)
        replica._wait_healthy()
        return replica

    def restart(self) -> Replica:
        """The same replica again: same state dir, settings and arguments, a new port."""
        assert self.proc.poll() is not None, "stop or kill it first"
        return self._spawn(self.home, self.env, self.args)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"reef serve exited {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.proc.kill()
        self.proc.wait()
        raise AssertionError(f"reef serve did not come up:\n{self.log()}")

    def health(self) -> dict[str, Any]:
        data: dict[str, Any] = httpx.get(self.url + "/healthz", timeout=10).json()
        return data

    def settle(self) -> None:
        """Wait until its recorder has stored everything it queued."""
        wait_for(lambda: self.health()["records_pending"] == 0, f"{self.url}'s recorder")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush; what was queued lives only in its journal."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> int | None:
        """SIGTERM and wait (a graceful stop flushes the recorder); kill if it hangs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


# ------------------------------------------------------------------ the load client


@dataclass
class Seen:
    """One request as its client saw it."""

    index: int
    shape: str
    replica: str  # the URL it was sent to
    receipt: str | None = None  # from the x-reef-agent-record-id header
    stream_receipt: str | None = None  # from the stream's receipt event
    release: str | None = None  # the x-reef-release-id header
    status: int | None = None
    whole: bool = False  # the answer arrived complete (a stream: up to its end marker)
    first_bytes_at: float | None = None  # time.monotonic() when the first body bytes came
    error: str | None = None  # the transport error that cut it off
    report_id: str | None = None
    report_status: int | None = None  # the final answer to the report (after retries)
    report_body: Any = None
    report_tries: int = 0


@dataclass
class Load:
    seen: list[Seen] = field(default_factory=list)

    def receipts(self) -> set[str]:
        """Every receipt any client received, from a header or from a stream."""
        out = {s.receipt for s in self.seen if s.receipt}
        return out | {s.stream_receipt for s in self.seen if s.stream_receipt}

    def in_flight(self, replica: str) -> list[Seen]:
        """Requests to ``replica`` whose client holds a receipt and is still reading."""
        return [
            s
            for s in self.seen
            if s.replica == replica and s.receipt and not s.whole and s.error is None
        ]

    def whole(self) -> list[Seen]:
        return [s for s in self.seen if s.whole]

    def reported(self) -> list[Seen]:
        return [s for s in self.seen if s.report_status in (200, 201)]


def shape_of(i: int) -> str:
    """Request ``i``'s shape: it changes every second request, so that with two replicas
    each gets all four (request ``i`` goes to replica ``i % 2``)."""
    return SHAPES[(i // 2) % len(SHAPES)]


def request_for(shape: str, i: int) -> tuple[str, dict[str, Any]]:
    """The path and body of request ``i`` in ``shape``."""
    stream = shape.endswith("-stream")
    messages = [{"role": "user", "content": f"q{i}: how are you?"}]
    if shape.startswith("anthropic"):
        body: dict[str, Any] = {"model": "m", "max_tokens": 64, "messages": messages}
        path = "/v1/messages"
    else:
        body = {"model": "m", "messages": messages}
        path = "/v1/chat/completions"
    if stream:
        body["stream"] = True
    return path, body


def stream_receipt(data: bytes) -> tuple[str | None, bool]:
    """The receipt in a stream's receipt event, and whether the stream reached its end
    marker (OpenAI ``[DONE]``, Anthropic ``message_stop``)."""
    receipt, ended = None, False
    for line in data.decode("utf-8", "replace").splitlines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            ended = True
            continue
        try:
            event = json.loads(payload)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        if event.get("type") == "message_stop":
            ended = True
        reef = event.get("reef")
        if isinstance(reef, dict) and reef.get("record_id"):
            receipt = str(reef["record_id"])
    return receipt, ended


async def _ask(client: httpx.AsyncClient, url: str, seen: Seen) -> None:
    path, body = request_for(seen.shape, seen.index)
    stream = bool(body.get("stream"))
    try:
        async with client.stream("POST", url + path, json=body) as response:
            seen.status = response.status_code
            seen.receipt = response.headers.get(RECORD_HEADER)
            seen.release = response.headers.get(RELEASE_HEADER)
            data = b""
            async for part in response.aiter_raw():
                if not data:
                    seen.first_bytes_at = time.monotonic()
                data += part
    except httpx.HTTPError as exc:
        seen.error = type(exc).__name__
        return
    if stream:
        seen.stream_receipt, ended = stream_receipt(data)
        seen.whole = seen.status == 200 and ended
    else:
        try:
            seen.whole = seen.status == 200 and bool(json.loads(data or b"null"))
        except ValueError:
            seen.whole = False


def report_body(seen: Seen) -> dict[str, Any]:
    """The report the load client sends for ``seen`` (its id set, so resending is safe)."""
    return {
        "id": seen.report_id,
        "score": float(seen.index % 5),
        "feedback": f"report {seen.index}",
        "references": [seen.receipt],
    }


async def _report(
    client: httpx.AsyncClient, urls: Callable[[], list[str]], seen: Seen, run: str, tries: int
) -> None:
    """Report on ``seen``'s receipt to the replica after the one that answered; a dropped
    connection is retried (on the next replica that is up) with the same id."""
    assert seen.receipt
    seen.report_id = f"{run}-{seen.index}"
    body = report_body(seen)
    for attempt in range(tries):
        live = urls()
        if not live:
            return
        others = [u for u in live if u != seen.replica] or live
        nxt = others[attempt % len(others)]
        seen.report_tries += 1
        try:
            response = await client.post(nxt + "/reef/report", json=body)
        except httpx.TransportError:
            continue
        seen.report_status = response.status_code
        try:
            seen.report_body = response.json()
        except ValueError:
            seen.report_body = response.text
        return


async def drive(
    urls: Sequence[str] | Callable[[], list[str]],
    requests: int,
    token: str,
    *,
    concurrency: int = 50,
    report: bool = True,
    run: str = "rep",
    on_done: Callable[[int, Load], Any] | None = None,
    report_tries: int = 3,
) -> Load:
    """``requests`` requests round-robin over ``urls`` (or over what the callable returns
    when each request starts: the replicas up then), ``concurrency`` at a time; each
    answered one with a receipt is reported to the next replica when ``report``.
    ``on_done(n, load)`` runs after the n-th request finished (the kill test's trigger)."""
    live: Callable[[], list[str]] = urls if callable(urls) else (lambda: list(urls))
    load = Load()
    done = 0
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency)
    headers = {"authorization": f"Bearer {token}"}
    timeout = httpx.Timeout(60.0, connect=10.0)
    async with httpx.AsyncClient(headers=headers, timeout=timeout, limits=limits) as client:

        async def one(i: int) -> None:
            nonlocal done
            async with gate:
                targets = live()
                if not targets:
                    return
                seen = Seen(i, shape_of(i), targets[i % len(targets)])
                load.seen.append(seen)
                await _ask(client, seen.replica, seen)
                if report and seen.whole and seen.receipt:
                    await _report(client, live, seen, run, report_tries)
            done += 1
            if on_done is not None:
                on_done(done, load)

        await asyncio.gather(*(one(i) for i in range(requests)))
    return load

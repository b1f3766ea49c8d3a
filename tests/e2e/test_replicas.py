"""Issue 17, item 4: several `reef serve` replicas on one PostgreSQL serve consistently.

Two real `reef serve` child processes (tests/e2e/replicas_rig.py), each on its own state
dir, share one PostgreSQL database (a throwaway cluster: tests/fakes/postgres.py) and one
scripted upstream (tests/fakes/upstream.py). A round-robin client sends the load; every
report goes to the replica that did *not* answer the request.

- 2,000 requests, 50 at a time: every receipt has exactly one record, every report is
  stored with its reference, nothing is duplicated, the counts match.
- SIGKILL of one replica while streams run: the load goes on on the survivor, the killed
  one restarts on its state dir (its receipt journal is replayed into PostgreSQL) and
  every receipt any client received resolves to a record.
- The served release converges: a publish on replica A's state dir reaches what replica
  B serves through their shared chain remote (B's background pull).
- The live loop's advisory lock: of two replicas' loops on one database, one starts a
  scenario's job; while another holds the lock, none does.

The load tests are marked slow (tens of seconds on two cores). Nothing asserts on time:
waits are polls bounded by a generous deadline.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from reef_cli.core.store import Store, open_store
from tests.e2e.replicas_rig import (
    SHAPES,
    Load,
    Replica,
    Seen,
    drive,
    reef_binary,
    report_body,
    wait_for,
)
from tests.fakes.server_thread import ServerThread
from tests.fakes.upstream import FakeUpstream, Turn

TOKEN = "reef_replica_token_0123456789abcdef"
REQUESTS = 2000
CONCURRENCY = 50


@pytest.fixture
def upstream() -> Iterator[tuple[FakeUpstream, str]]:
    fake = FakeUpstream(default=Turn(text="fine thanks, and you?"))
    with ServerThread(fake.app) as server:
        yield fake, server.url + "/v1"


@pytest.fixture
def replicas() -> Iterator[list[Replica]]:
    """Replicas a test started; stopped at the end (their logs stay beside their state
    dirs, in the test's tmp_path)."""
    started: list[Replica] = []
    yield started
    for replica in started:
        replica.stop()


def _store(url: str) -> Store:
    store = open_store(url)
    assert store.kind == "postgresql"
    return store


def _sql(url: str, query: str) -> list[Any]:
    """A read straight from PostgreSQL, for what the Store interface does not count."""
    import psycopg

    with psycopg.connect(url) as conn:
        return list(conn.execute(query).fetchall())


# ------------------------------------------------------------------ 2,000 requests


@pytest.mark.slow
def test_two_replicas_2000_requests_each_reported_to_the_other(
    tmp_path: Path, postgres_url: str, upstream: tuple[FakeUpstream, str], replicas: list[Replica]
) -> None:
    _, up = upstream
    a = Replica.start(tmp_path / "a", up, postgres_url, TOKEN)
    replicas.append(a)
    b = Replica.start(tmp_path / "b", up, postgres_url, TOKEN)
    replicas.append(b)

    load = asyncio.run(drive([a.url, b.url], REQUESTS, TOKEN, concurrency=CONCURRENCY, run="r1"))

    # every request answered whole, half by each replica, all four shapes
    assert len(load.seen) == REQUESTS
    failed = [(s.index, s.shape, s.status, s.error) for s in load.seen if not s.whole]
    assert not failed, failed[:5]
    assert Counter(s.replica for s in load.seen) == {a.url: REQUESTS // 2, b.url: REQUESTS // 2}
    assert Counter(s.shape for s in load.seen) == {k: REQUESTS // len(SHAPES) for k in SHAPES}

    # receipts: one per request, unique across the replicas, the stream's event = the header
    receipts = [s.receipt for s in load.seen]
    assert all(receipts) and len(set(receipts)) == REQUESTS
    for s in load.seen:
        if s.shape.endswith("-stream"):
            assert s.stream_receipt == s.receipt, (s.index, s.stream_receipt, s.receipt)

    # the reports, each sent to the replica that did not answer (refusals: checked last)
    refused = [s for s in load.seen if s.report_status not in (200, 201)]
    a.settle()
    b.settle()
    # once both recorders are idle, a refused report (same id, to the same replica) is
    # sent again: every receipt resolves by then
    other = {a.url: b, b.url: a}
    again = Counter(_post_report(other[s.replica], s).status_code for s in refused)
    assert set(again) <= {201}, again

    store = _store(postgres_url)
    try:
        # exactly one record per receipt, each complete; nothing else stored
        states = store.states([r for r in receipts if r])
        assert len(states) == REQUESTS
        assert Counter(states.values()) == {"complete": REQUESTS}
        assert store.count() == REQUESTS
        [(rows, ids)] = _sql(postgres_url, "SELECT count(*), count(DISTINCT id) FROM records")
        assert rows == ids == REQUESTS

        # every report stored once, with its reference
        assert store.report_count() == REQUESTS
        stored = {r.id: r for r in store.reports()}
        assert set(stored) == {s.report_id for s in load.seen}
        for s in load.seen:
            row = stored[str(s.report_id)]
            assert row.references == [s.receipt]
            assert row.score == float(s.index % 5) and row.scenario == "default"
        [(refs, distinct)] = _sql(
            postgres_url, "SELECT count(*), count(DISTINCT record_id) FROM report_refs"
        )
        assert refs == distinct == REQUESTS
        probe = load.seen[7]
        assert [r.id for r in store.reports(record_id=probe.receipt)] == [probe.report_id]
    finally:
        store.close()

    # a retried report (same id, same body) on either replica is the same report
    for s in load.seen[:10]:
        for replica in (a, b):
            response = _post_report(replica, s)
            assert response.status_code == 200, response.text
            assert response.json()["created"] is False
    store = _store(postgres_url)
    try:
        assert store.report_count() == REQUESTS
    finally:
        store.close()

    # every report was accepted the first time, though its receipt was recorded by the
    # other replica's writer thread, after the answer (issue 17: "reports against a
    # receipt recorded by another replica work")
    shapes = Counter(s.shape for s in refused)
    examples = [(s.index, s.report_status, s.report_body) for s in refused[:2]]
    if refused:
        pytest.fail(
            f"{len(refused)} of {REQUESTS} report(s) refused when sent right after the "
            f"answer ({dict(shapes)}), accepted when sent again later; e.g. {examples}"
        )


def _post_report(replica: Replica, s: Seen) -> httpx.Response:
    """Request ``s``'s report again, exactly as the load client sent it (replicas_rig)."""
    return httpx.post(
        replica.url + "/reef/report",
        json=report_body(s),
        headers={"authorization": f"Bearer {TOKEN}"},
        timeout=30,
    )


# ------------------------------------------------------------------ SIGKILL mid-load

KILL_REQUESTS = 800  # at most: after the kill the rest goes to the survivor
KILL_AFTER = 250  # requests finished before replica A is killed
SLOW = "slow words " * 5
SLOW_STALL_S = 2.0  # every fifth stream's silence after its first chunk


def _slow_streams(path: str, body: dict[str, Any]) -> Turn | None:
    """Every fifth request's stream stalls after its first chunk: still running at the kill."""
    import re

    found = re.search(r"q(\d+):", str(body.get("messages")))
    if body.get("stream") and found and int(found.group(1)) % 5 == 0:
        return Turn(text=SLOW, stall_mid=SLOW_STALL_S)
    return None


def _stalled(s: Seen) -> bool:
    """A slow stream in the middle of its stall: the rest of its answer is not sent yet, so
    a kill now cuts it (a stream near its end may be in the client's buffers already)."""
    return (
        s.index % 5 == 0
        and s.shape.endswith("-stream")
        and s.first_bytes_at is not None
        and time.monotonic() - s.first_bytes_at < SLOW_STALL_S / 2
    )


@pytest.mark.slow
def test_sigkill_of_one_replica_mid_load_loses_no_received_receipt(
    tmp_path: Path, postgres_url: str, replicas: list[Replica]
) -> None:
    fake = FakeUpstream(default=Turn(text="fine thanks, and you?"), chooser=_slow_streams)
    with ServerThread(fake.app) as server:
        up = server.url + "/v1"
        a = Replica.start(tmp_path / "a", up, postgres_url, TOKEN)
        replicas.append(a)
        b = Replica.start(tmp_path / "b", up, postgres_url, TOKEN)
        replicas.append(b)
        live = [a.url, b.url]

        def kill_a(done: int, load: Load) -> None:
            # after KILL_AFTER answers, at a moment a client is mid-stream on A (stalled)
            stalled = [s for s in load.in_flight(a.url) if _stalled(s)]
            if a.url in live and done >= KILL_AFTER and stalled:
                live.remove(a.url)  # the load balancer takes it out; new requests go to b
                a.kill()

        load = asyncio.run(
            drive(lambda: list(live), KILL_REQUESTS, TOKEN, report=False, on_done=kill_a)
        )
        assert a.proc.returncode == -9, "replica A was never killed (no stream in flight on it)"
        on_a = [s for s in load.seen if s.replica == a.url]
        cut = [s for s in on_a if not s.whole]
        assert any(s.receipt for s in cut), "the kill cut no answer in flight with a receipt"
        assert all(s.whole for s in load.seen if s.replica == b.url)
        assert len(load.seen) == KILL_REQUESTS  # the survivor took the rest

        # restart A on its state dir: it replays its journal into PostgreSQL
        a2 = a.restart()
        replicas.append(a2)
        a2.settle()
        b.settle()
        assert list((a.home / "records-journal").glob("*.seg")) == []

        received = load.receipts()
        store = _store(postgres_url)
        try:
            states = store.states(sorted(received))
            missing = sorted(received - set(states))
            assert not missing, f"{len(missing)} received receipt(s) without a record"
            for s in load.seen:
                if s.whole and s.receipt:
                    assert states[s.receipt] == "complete", (s.index, states[s.receipt])
            partial = [s.receipt for s in cut if s.receipt]
            assert {states[r] for r in partial} <= {"complete", "interrupted"}
            for rid, state in states.items():
                if state == "interrupted":
                    rec = store.get(rid)
                    assert rec.stream and rec.error and "interrupted" in rec.error
            assert "streaming" not in set(states.values())
            # a request cut before its headers has a record no client holds a receipt of
            assert store.count() >= len(received)
        finally:
            store.close()

        # every received receipt can be reported on, on either replica
        after = asyncio.run(_report_all(sorted(received), [a2.url, b.url]))
        assert Counter(after) == {201: len(received)}, Counter(after)
        store = _store(postgres_url)
        try:
            assert store.report_count() == len(received)
        finally:
            store.close()


async def _report_all(receipts: list[str], urls: list[str]) -> list[int]:
    headers = {"authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(headers=headers, timeout=60) as client:
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one(i: int, receipt: str) -> int:
            async with gate:
                body = {"id": f"after-{i}", "score": 1.0, "references": [receipt]}
                response = await client.post(urls[i % len(urls)] + "/reef/report", json=body)
                return response.status_code

        return list(await asyncio.gather(*(one(i, r) for i, r in enumerate(receipts))))


# ------------------------------------------------------------------ the served release

POLL = 0.2  # remote_poll_seconds of both replicas


def _reef(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """A `reef` command on ``home``'s state dir; fails the test with its output."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("REEF_")}
    env["REEF_HOME"] = str(home)
    done = subprocess.run(
        [str(reef_binary()), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"reef {' '.join(args)}: {done.stdout}\n{done.stderr}"
    return done


def _tree(path: Path, rule: str) -> Path:
    (path / "rules").mkdir(parents=True, exist_ok=True)
    (path / "rules" / "style.md").write_text(f"# Style\n\n{rule}\n")
    return path


def _served(replica: Replica, scenario: str) -> str | None:
    response = httpx.post(
        replica.url + "/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "which release?"}]},
        headers={"authorization": f"Bearer {TOKEN}", "x-reef-scenario": scenario},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response.headers.get("x-reef-release-id")


@pytest.mark.slow
def test_a_publish_on_one_replica_is_served_by_the_other(
    tmp_path: Path, postgres_url: str, upstream: tuple[FakeUpstream, str], replicas: list[Replica]
) -> None:
    _, up = upstream
    remote = tmp_path / "chain.git"
    subprocess.run(["git", "init", "--bare", "-q", str(remote)], check=True)
    home_a, home_b = tmp_path / "a", tmp_path / "b"
    _reef(home_a, "scenario", "create", "shop")
    _reef(home_a, "scenario", "remote", "add", "shop", str(remote))
    _reef(
        home_a, "harness", "publish", str(_tree(tmp_path / "t1", "one")), "-s", "shop", "-m", "r1"
    )
    _reef(home_b, "scenario", "remote", "add", "shop", str(remote))  # B's copy: pulled, r1

    serve_yaml = tmp_path / "serve.yaml"
    serve_yaml.write_text(f"remote_poll_seconds: {POLL}\nrelease_cache_seconds: {POLL}\n")
    a = Replica.start(home_a, up, postgres_url, TOKEN, "-c", str(serve_yaml))
    replicas.append(a)
    b = Replica.start(home_b, up, postgres_url, TOKEN, "-c", str(serve_yaml))
    replicas.append(b)
    assert _served(a, "shop") == _served(b, "shop") == "1"

    # published on A's state dir (with a remote: fetch, append, push) -> B serves r2
    _reef(
        home_a, "harness", "publish", str(_tree(tmp_path / "t2", "two")), "-s", "shop", "-m", "r2"
    )
    assert _served(a, "shop") == "2"
    wait_for(lambda: _served(b, "shop") == "2", "replica B to serve r2", deadline_s=60)

    # and the other way: published on B, served by A
    _reef(
        home_b, "harness", "publish", str(_tree(tmp_path / "t3", "three")), "-s", "shop", "-m", "r3"
    )
    assert _served(b, "shop") == "3"
    wait_for(lambda: _served(a, "shop") == "3", "replica A to serve r3", deadline_s=60)


# ------------------------------------------------------------------ the live loop's lock


def test_the_live_loop_lock_lets_one_replica_start_a_scenarios_job(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two replicas' apps (in this process, on one state dir, each with its own
    PostgreSQL pool and a stand-in runner that leaves jobs queued) and a full batch:
    while a third connection holds the scenario's lock neither starts a job; once it is
    free exactly one does, and it stays one."""
    from contextlib import ExitStack

    from reef_cli.core import jobs
    from reef_cli.core.tokens import TokenSet
    from reef_cli.server.app import create_app
    from reef_cli.server.serve_config import LearningConfig, ServeConfig
    from tests.server.test_learning import Recording, first_release

    monkeypatch.setenv("REEF_DATABASE_URL", postgres_url)
    first_release("shop")
    auth = {"authorization": f"Bearer {TOKEN}"}
    holder = _store(postgres_url)
    with ExitStack() as stack:
        stack.callback(holder.close)
        up = stack.enter_context(ServerThread(FakeUpstream().app))
        runners = [Recording(end=None), Recording(end=None)]
        apps, urls = [], []
        for runner in runners:
            loop = LearningConfig(recipe="gepa", batch_size=3, poll_s=0.05, min_interval_s=0)
            config = ServeConfig(upstream=up.url + "/v1", upstream_dialect="openai", reef=loop)
            app = create_app(config, tokens=TokenSet(TOKEN), jobs=runner)
            assert app.state.store.kind == "postgresql"
            apps.append(app)
            urls.append(stack.enter_context(ServerThread(app)).url)

        def polls(n: int) -> None:
            targets = [app.state.learning.checks + n for app in apps]
            wait_for(
                lambda: all(
                    app.state.learning.checks >= t for app, t in zip(apps, targets, strict=True)
                ),
                f"{n} more polls of both loops",
            )

        def waits_for() -> str | None:
            got = httpx.get(urls[1] + "/reef/scenarios/shop/learning", headers=auth, timeout=30)
            assert got.status_code == 200, got.text
            return (got.json().get("next_trigger") or {}).get("waits_for")

        # the lock is one between replicas: each store's connection sees the other's
        key = "live-loop:shop"
        with (
            apps[0].state.store.exclusive(key) as first,
            apps[1].state.store.exclusive(key) as second,
        ):
            assert (first, second) == (True, False)

        with holder.exclusive("live-loop:shop") as held:
            assert held
            for name in ("s1", "s2", "s3"):  # answered by replica A, scored on replica B
                for text in ("please fix the failing test", "thanks"):
                    answer = httpx.post(
                        urls[0] + "/v1/chat/completions",
                        json={"model": "m", "messages": [{"role": "user", "content": text}]},
                        headers={**auth, "x-reef-scenario": "shop", "x-reef-session": name},
                        timeout=30,
                    )
                    assert answer.status_code == 200, answer.text
                assert apps[0].state.recorder.flush(10)
                score = httpx.post(
                    urls[1] + "/reef/report",
                    json={"score": 1.0, "references": [answer.headers["x-reef-agent-record-id"]]},
                    headers=auth,
                    timeout=30,
                )
                assert score.status_code == 201, score.text
            wait_for(lambda: waits_for() == "replica", "a loop to find the lock held")
            polls(5)
            assert runners[0].jobs == runners[1].jobs == [] and jobs.active("shop") == []
            assert waits_for() == "replica"

        started = wait_for(lambda: runners[0].jobs + runners[1].jobs, "a job once the lock is free")
        polls(10)
        assert len(runners[0].jobs) + len(runners[1].jobs) == 1, (runners[0].jobs, runners[1].jobs)
        [active] = jobs.active("shop")
        assert active.id == started[0].id and active.origin == "live-loop"
        assert waits_for() == "job"

"""200 concurrent requests while the upstream randomly fails, stalls or drops mid-stream."""

from __future__ import annotations

import asyncio
import random

import httpx

from reef_cli.core.reports import list_reports
from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.server.receipts import RECORD_HEADER
from tests.fakes.upstream import FakeUpstream, Turn
from tests.server.conftest import TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}"}


def test_fault_storm(make_stack):
    rng = random.Random(7)
    modes = ["ok", "ok", "ok", "500", "stall", "drop", "stall_mid"]

    def chooser(path, body):
        mode = rng.choice(modes)
        return {
            "ok": Turn(text="fine thanks"),
            "500": Turn(status=500, error="upstream exploded"),
            "stall": Turn(stall=1.5),
            "drop": Turn(drop_after=2),
            "stall_mid": Turn(stall_mid=1.5),
        }[mode]

    stack = make_stack(
        "openai", fake=FakeUpstream(chooser=chooser), read_timeout=0.6, pool_size=300
    )
    receipts: list[str] = []
    accepted_reports: list[str] = []

    async def one(i: int, client: httpx.AsyncClient) -> None:
        anthropic = i % 2 == 0
        path = "/v1/messages" if anthropic else "/v1/chat/completions"
        body = {"model": "m", "max_tokens": 20, "messages": [{"role": "user", "content": f"q{i}"}]}
        body["stream"] = i % 3 != 0
        async with client.stream("POST", path, json=body, headers=AUTH) as r:
            data = await r.aread()
        assert r.status_code in (200, 500, 502, 504), r.status_code
        receipt = r.headers.get(RECORD_HEADER)
        assert receipt, (r.status_code, data[:200])
        receipts.append(receipt)
        if r.status_code == 200 and not body["stream"] and i % 4 == 0:
            rr = await client.post(
                "/reef/report",
                json={"score": i, "references": [receipt], "id": f"rep-{i}"},
                headers=AUTH,
            )
            assert rr.status_code == 201, rr.text
            accepted_reports.append(rr.json()["id"])

    async def storm() -> None:
        limits = httpx.Limits(max_connections=250, max_keepalive_connections=250)
        async with httpx.AsyncClient(base_url=stack.url, timeout=30, limits=limits) as client:
            results = await asyncio.gather(
                *(one(i, client) for i in range(200)), return_exceptions=True
            )
        errors = [r for r in results if isinstance(r, BaseException)]
        assert not errors, errors[:3]

    asyncio.run(storm())
    assert httpx.get(stack.url + "/healthz").status_code == 200  # still up
    assert httpx.post(
        stack.url + "/v1/chat/completions",
        headers=AUTH,
        json={"model": "m", "messages": [{"role": "user", "content": "x"}]},
    ).status_code in (200, 500, 502, 504)
    stack.reef.stop()  # shutdown flushes the recorder
    store = SQLiteStore(stack.home / "records.sqlite3")
    found = store.exists(receipts)
    assert len(receipts) == 200 and set(found) == set(receipts)
    statuses = {store.get(r).status for r in receipts}
    assert {200, 500, 504} <= statuses
    stored = {r.id for r in list_reports(store)}
    assert set(accepted_reports) <= stored and accepted_reports

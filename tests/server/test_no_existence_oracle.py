"""A scenario token learns nothing about what other scenarios hold: asking for a job,
receipt, response, release or scenario it may not see gets the same status and body as
asking for one that does not exist (only the id it sent differs)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from reef_cli.core import jobs, scenarios
from reef_cli.core.publishing import publish_files
from reef_cli.server.receipts import RECORD_HEADER
from tests.server.conftest import LIMITED, TOKEN

MAIN = {"authorization": f"Bearer {TOKEN}"}
SCOPED = {"authorization": f"Bearer {LIMITED}"}  # may use team-a only
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def world(make_stack) -> dict[str, Any]:
    """team-a (the token's, empty) and team-b (another team's: a release, a job, a
    receipt, a stored Responses turn)."""
    scenarios.create("team-a")
    scenarios.create("team-b")
    publish_files("team-b", {"rules/a.md": "Be brief.\n"}, reason="start")
    stack = make_stack("openai")
    b = {**MAIN, "x-reef-scenario": "team-b"}
    receipt = httpx.post(stack.url + "/v1/chat/completions", json=CHAT, headers=b)
    answer = httpx.post(stack.url + "/v1/responses", json={"model": "m", "input": "hi"}, headers=b)
    assert receipt.status_code == answer.status_code == 200
    stack.flush()
    return {
        "stack": stack,
        "job": jobs.create("team-b", "reefine", "make it brief").id,
        "receipt": receipt.headers[RECORD_HEADER],
        "response": answer.json()["id"],
    }


def answer(stack: Any, method: str, path: str, body: Any = None, **headers: str) -> Any:
    r = httpx.request(
        method, stack.url + path, json=body, headers={**SCOPED, **headers}, timeout=10
    )
    return r.status_code, r.text


def same(
    stack: Any, hidden: str, unknown: str, method: str, path: str, body: Any = None, **headers: str
) -> int:
    """The answer about ``hidden`` (exists, not the caller's) equals the one about
    ``unknown`` (exists nowhere) once the id is swapped; returns the status."""

    def fill(value: Any, name: str) -> Any:
        if isinstance(value, str):
            return value.replace("{}", name)
        if isinstance(value, dict):
            return {k: fill(v, name) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v, name) for v in value]
        return value

    got = answer(stack, method, fill(path, hidden), fill(body, hidden), **fill(headers, hidden))
    want = answer(stack, method, fill(path, unknown), fill(body, unknown), **fill(headers, unknown))
    assert got[0] == want[0], (got, want)
    assert got[1].replace(hidden, "ID") == want[1].replace(unknown, "ID"), (got, want)
    return got[0]


def test_jobs(world):
    status = same(world["stack"], world["job"], "job_0123456789abcdef", "GET", "/reef/jobs/{}")
    assert status == 404


@pytest.mark.parametrize("header", [{"x-reef-scenario": "team-a"}, {}])
def test_receipts_in_a_report(world, header):
    body = {"score": 1, "references": ["{}"]}
    unknown = "rec_" + "0" * 24
    status = same(world["stack"], world["receipt"], unknown, "POST", "/reef/report", body, **header)
    assert status == 400
    assert world["stack"].store().report_count() == 0


def test_responses_previous_response_id(world):
    body = {"model": "m", "input": "again", "previous_response_id": "{}"}
    unknown = "resp_" + "0" * 24
    status = same(
        world["stack"],
        world["response"],
        unknown,
        "POST",
        "/v1/responses",
        body,
        **{"x-reef-scenario": "team-a"},
    )
    assert status == 404


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/reef/scenarios/{}/releases", None),
        ("GET", "/reef/scenarios/{}/learning", None),
        ("POST", "/reef/scenarios/{}/rollback", {"to": 1}),
        ("POST", "/reef/scenarios/{}/promote", {"release": 1}),
        ("GET", "/reef/harness?scenario={}&release=1", None),
        ("GET", "/reef/harness/releases/1/page?scenario={}", None),
        ("GET", "/reef/harness/install?adapter=pi&scenario={}", None),
        ("POST", "/reef/evolve", {"ask": "be brief", "scenario": "{}"}),
        ("POST", "/reef/scenarios", {"name": "{}"}),
    ],
)
def test_scenarios_and_their_releases(world, method, path, body):
    status = same(world["stack"], "team-b", "team-zz", method, path, body)
    assert status == 403  # refused before anything is looked up
    assert [r.number for r in scenarios.get("team-b").chain().releases()] == [1]


def test_the_scenario_list_shows_only_the_tokens(world):
    r = httpx.get(world["stack"].url + "/reef/scenarios", headers=SCOPED)
    assert [s["name"] for s in r.json()] == ["team-a"]

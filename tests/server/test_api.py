"""The Reef API over HTTP: reports, scenarios, releases, rollback/promote, harness, health."""

from __future__ import annotations

import httpx

from reef_cli.core import scenarios
from reef_cli.server.receipts import RECORD_HEADER
from tests.cli.helpers import reef
from tests.server.conftest import LIMITED, TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}"}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _receipt(stack, scenario="default"):
    r = httpx.post(
        stack.url + "/v1/chat/completions", json=CHAT, headers={**AUTH, "x-reef-scenario": scenario}
    )
    assert r.status_code == 200
    return r.headers[RECORD_HEADER]


def test_reports(make_stack):
    stack = make_stack("openai")
    url = stack.url + "/reef/report"
    rec = _receipt(stack)  # reported at once: the server flushes pending records first
    r = httpx.post(
        url, json={"score": 0.5, "feedback": "ok", "references": [rec], "id": "r-1"}, headers=AUTH
    )
    assert r.status_code == 201, r.text
    assert r.json()["scenario"] == "default" and r.json()["references"] == [rec]
    again = httpx.post(
        url, json={"score": 0.5, "feedback": "ok", "references": [rec], "id": "r-1"}, headers=AUTH
    )
    assert again.status_code == 200 and again.json()["id"] == "r-1"
    clash = httpx.post(url, json={"score": 0.9, "references": [rec], "id": "r-1"}, headers=AUTH)
    assert clash.status_code == 409

    def bad(body, field, raw=None):
        kw = (
            {"content": raw, "headers": {**AUTH, "content-type": "application/json"}}
            if raw
            else {"json": body, "headers": AUTH}
        )
        r = httpx.post(url, **kw)
        assert r.status_code == 400, (body, r.text)
        assert field in r.json()["error"]["message"], r.json()
        return r

    bad({"score": True, "references": [rec]}, "score")
    bad(None, "score", raw=b'{"score": NaN, "references": []}')
    bad(None, "score", raw=b'{"score": Infinity}')
    bad({"score": "1", "references": [rec]}, "score")
    bad({"score": 1, "references": ["nope"]}, "references")
    bad({"score": 1, "references": ["rec_" + "0" * 24]}, "references")
    bad({"score": 1, "references": [rec], "surprise": 1}, "surprise")
    bad({"feedback": "x" * 70000, "references": [rec]}, "feedback")
    bad({"references": [rec]}, "score")
    bad(None, "body", raw=b"{broken")
    other = _receipt(stack, "other-team")
    r = httpx.post(url, json={"score": 1, "references": [rec, other]}, headers=AUTH)
    assert r.status_code == 400 and "references" in r.json()["error"]["message"]
    r = httpx.post(
        url,
        json={"score": 1, "references": [other]},
        headers={**AUTH, "x-reef-scenario": "default"},
    )
    assert r.status_code == 400
    limited = {"authorization": f"Bearer {LIMITED}"}
    r = httpx.post(url, json={"score": 1, "references": [rec]}, headers=limited)
    assert r.status_code == 400 and "unknown receipt" in r.text  # not the token's: unknown
    team = _receipt(stack, "team-a")
    r = httpx.post(url, json={"score": 2, "references": [team]}, headers=limited)
    assert r.status_code == 201 and r.json()["scenario"] == "team-a"


def test_scenarios_releases_rollback_promote_harness(make_stack):
    stack = make_stack("openai")
    base = stack.url
    assert httpx.get(base + "/healthz").json()["status"] == "ok"
    assert "/reef/report" in httpx.get(base + "/openapi.json").json()["paths"]
    r = httpx.post(base + "/reef/scenarios", json={"name": "web", "description": "d"}, headers=AUTH)
    assert r.status_code == 201 and r.json()["name"] == "web"
    assert (
        httpx.post(base + "/reef/scenarios", json={"name": "web"}, headers=AUTH).status_code == 409
    )
    assert (
        httpx.post(base + "/reef/scenarios", json={"name": "Bad Name"}, headers=AUTH).status_code
        == 400
    )
    assert [s["name"] for s in httpx.get(base + "/reef/scenarios", headers=AUTH).json()] == ["web"]
    assert httpx.get(base + "/reef/scenarios/nope/releases", headers=AUTH).status_code == 404
    chain = scenarios.get("web").chain()
    chain.publish({"rules/a.md": "one\n"})
    chain.publish({"rules/a.md": "two\n"})
    rels = httpx.get(base + "/reef/scenarios/web/releases", headers=AUTH).json()
    assert [r["number"] for r in rels] == [1, 2]
    h = httpx.get(base + "/reef/harness", params={"scenario": "web"}, headers=AUTH).json()
    assert h["release"]["number"] == 2 and h["files"] == {"rules/a.md": "two\n"}
    r = httpx.post(base + "/reef/scenarios/web/rollback", json={}, headers=AUTH)
    assert r.status_code == 201 and r.json()["number"] == 3 and r.json()["points_to"] == 1
    h = httpx.get(
        base + "/reef/harness", params={"scenario": "web", "release": "served"}, headers=AUTH
    ).json()
    assert h["files"] == {"rules/a.md": "one\n"}
    r = httpx.post(base + "/reef/scenarios/web/promote", json={"release": 2}, headers=AUTH)
    assert r.status_code == 201 and r.json()["number"] == 4 and r.json()["source"] == "promote"
    assert (
        httpx.post(base + "/reef/scenarios/web/rollback", json={"to": 99}, headers=AUTH).status_code
        == 404
    )
    r = httpx.get(base + "/reef/harness", params={"scenario": "web", "release": "r9"}, headers=AUTH)
    assert r.status_code == 404 and "r9" in r.json()["error"]["message"]
    assert httpx.get(base + "/reef/harness", params={"scenario": "web"}).status_code == 401


def _chain_served_by_a_rollback(name: str):  # type: ignore[no-untyped-def]
    """r1 A, r2 B, r3 a rollback to r1 (A, served), r4 C a pending proposal."""
    chain = scenarios.create(name).chain()
    chain.publish({"rules/a.md": "A\n"})
    chain.publish({"rules/a.md": "B\n"})
    chain.publish({"rules/a.md": "A\n"}, source="rollback", points_to=1)
    chain.publish({"rules/a.md": "C\n"}, status="pending")
    return chain


def test_cli_and_api_roll_back_to_the_same_release(make_stack):
    """A rollback that names no release — `reef harness rollback` without RELEASE, the API
    without ``to`` — restores ``Chain.rollback_target`` either way: the release served
    before the current one. (Before, the API took "served.points_to - 1", here r0: a 404;
    the CLI needed a RELEASE, and `previous` names r3, the served content: a no-op.)"""
    stack = make_stack("openai")
    by_api = _chain_served_by_a_rollback("by-api")
    by_cli = _chain_served_by_a_rollback("by-cli")
    assert by_api.served().number == 3 and by_api.rollback_target().number == 2
    for expected in (2, 3):  # the second rollback undoes the first
        r = httpx.post(stack.url + "/reef/scenarios/by-api/rollback", json={}, headers=AUTH)
        assert r.status_code == 201, r.text
        assert (
            r.json()["points_to"] == expected and r.json()["reason"] == f"rollback to r{expected}"
        )
        reef("harness", "rollback", "-s", "by-cli")
        cli_release = by_cli.latest()
        assert cli_release is not None and cli_release.meta.points_to == expected
        assert r.json()["number"] == cli_release.number
        assert r.json()["content_hash"] == cli_release.meta.content_hash
    # nothing earlier to go back to: the same 404 / exit 1 line from both
    scenarios.create("single").chain().publish({"rules/a.md": "A\n"})
    r = httpx.post(stack.url + "/reef/scenarios/single/rollback", headers=AUTH)
    assert r.status_code == 404 and "no earlier release" in r.json()["error"]["message"]
    assert "no earlier release" in reef("harness", "rollback", "-s", "single", code=1)

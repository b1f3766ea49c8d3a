"""`GET /reef/harness/releases/{n}/page`: the release page over HTTP, behind the token."""

from __future__ import annotations

import httpx

from reef_cli.core import scenarios
from reef_cli.core.release_page import SECTIONS
from tests.core.test_release_page import Parsed, publish_evaluated, publish_plain
from tests.server.conftest import LIMITED, TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}"}
PAGE = "/reef/harness/releases/{}/page"


def test_release_page_route(make_stack):
    stack = make_stack("openai")
    publish_plain("web")
    publish_evaluated("web")
    url = stack.url + PAGE.format(2)
    r = httpx.get(url, params={"scenario": "web"}, headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in r.headers["content-security-policy"]
    parsed = Parsed(r.text)
    assert parsed.sections == list(SECTIONS) and len(parsed.images) == 1
    assert "candidate beats incumbent" in r.text and "http://" not in r.text

    # no token, a wrong one: 401 before anything is read
    assert httpx.get(url, params={"scenario": "web"}).status_code == 401
    wrong = {"authorization": "Bearer nope"}
    assert httpx.get(url, params={"scenario": "web"}, headers=wrong).status_code == 401
    # a token for another scenario: 403
    limited = {"authorization": f"Bearer {LIMITED}"}
    assert httpx.get(url, params={"scenario": "web"}, headers=limited).status_code == 403
    # an unknown release or scenario: 404 with a message that names the fix
    r = httpx.get(stack.url + PAGE.format(9), params={"scenario": "web"}, headers=AUTH)
    assert r.status_code == 404 and "r9" in r.json()["error"]["message"]
    r = httpx.get(url, params={"scenario": "nope"}, headers=AUTH)
    assert r.status_code == 404 and "unknown scenario" in r.json()["error"]["message"]
    assert httpx.get(stack.url + PAGE.format(0), headers=AUTH).status_code == 400
    assert httpx.get(url, params={"scenario": "Bad Name"}, headers=AUTH).status_code == 400


def test_release_page_defaults_to_the_servers_scenario(make_stack):
    stack = make_stack("openai")
    assert httpx.get(stack.url + PAGE.format(1), headers=AUTH).status_code == 404
    scenarios.create("default")
    scenarios.get("default").chain().publish({"rules/a.md": "one\n"}, reason="first")
    r = httpx.get(stack.url + PAGE.format(1), headers=AUTH)
    assert r.status_code == 200 and "No evaluation" in r.text and "default · r1" in r.text
    assert (
        "/reef/harness/releases/{n}/page" in httpx.get(stack.url + "/openapi.json").json()["paths"]
    )

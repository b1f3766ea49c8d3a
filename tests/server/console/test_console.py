"""The console over HTTP (issue 27, item 1): sign-in, what a scoped token sees, the CSRF
defence on every write, promote and reject from the inbox, the records search, and
errors as pages. The browser-driven run is tests/e2e/test_console_chromium.py."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from reef_cli.core import proposals, scenarios
from reef_cli.core.publishing import publish_files
from reef_cli.core.tokens import ScopedToken, TokenSet, digest
from reef_cli.server.app import create_app
from reef_cli.server.console.html import CSP
from reef_cli.server.serve_config import ServeConfig
from tests.fakes.server_thread import ServerThread
from tests.fakes.upstream import FakeUpstream
from tests.server.conftest import LIMITED, TOKEN

RULE = "rules/style.md"
TESTS_RULE = "rules/tests-first.md"


@pytest.fixture
def server(home: Path):
    scenarios.create("shop")
    scenarios.create("team-a")
    publish_files("shop", {RULE: "Prefer small, tested changes.\n"}, reason="start")
    publish_files(
        "shop",
        {RULE: "Prefer small, tested changes.\n", TESTS_RULE: "Write a failing test first.\n"},
        reason="reproduce bugs with a failing test",
        hold="review",
    )
    publish_files("team-a", {RULE: "Team A's rule.\n"}, reason="start")
    fake = FakeUpstream()
    with ServerThread(fake.app) as up:
        config = ServeConfig(upstream=up.url + "/v1", default_scenario="shop")
        scoped = [ScopedToken("limited", digest(LIMITED).hex(), ("team-a",))]
        app = create_app(config, tokens=TokenSet(TOKEN, scoped))
        with ServerThread(app) as reef:
            reef.reef_app = app  # type: ignore[attr-defined]
            yield reef


def _signed_in(url: str, token: str = TOKEN) -> httpx.Client:
    client = httpx.Client(base_url=url)
    r = client.post("/reef/ui/login", data={"token": token, "next": "/reef/ui"})
    assert r.status_code == 303 and r.headers["location"] == "/reef/ui", r.text
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/reef/ui" in cookie
    assert token not in cookie  # the cookie names a session, never the token
    return client


def _csrf(html: str) -> str:
    found = re.search(r'name="reef-csrf" content="([^"]+)"', html)
    assert found, html[:500]
    return found.group(1)


def test_a_page_without_a_session_asks_to_sign_in(server):
    r = httpx.get(server.url + "/reef/ui/scenarios/shop")
    assert r.status_code == 303
    assert r.headers["location"] == "/reef/ui/login?next=%2Freef%2Fui%2Fscenarios%2Fshop"
    form = httpx.get(server.url + r.headers["location"])
    assert form.status_code == 200 and 'type="password"' in form.text
    assert form.headers["content-security-policy"] == CSP


def test_a_wrong_token_signs_nobody_in(server):
    r = httpx.post(server.url + "/reef/ui/login", data={"token": "nope"})
    assert r.status_code == 401 and "not a Reef token" in r.text
    assert "set-cookie" not in r.headers


def test_sign_in_never_redirects_off_the_console(server):
    client = httpx.Client(base_url=server.url)
    for target in ("https://evil.example/", "//evil.example/reef/ui", "/reef/scenarios"):
        r = client.post("/reef/ui/login", data={"token": TOKEN, "next": target})
        assert r.status_code == 303 and r.headers["location"] == "/reef/ui", target


def test_a_sign_in_from_another_site_is_refused(server):
    r = httpx.post(
        server.url + "/reef/ui/login",
        data={"token": TOKEN},
        headers={"origin": "https://evil.example"},
    )
    assert r.status_code == 403 and "set-cookie" not in r.headers


def test_the_overview_lists_what_the_token_may_see(server):
    main = _signed_in(server.url)
    page = main.get("/reef/ui")
    assert page.status_code == 200, page.text
    assert page.headers["content-security-policy"] == CSP
    assert ">shop</a>" in page.text and ">team-a</a>" in page.text
    assert "<script" in page.text and "<script>" not in page.text  # own file, nothing inline

    scoped = _signed_in(server.url, LIMITED)
    page = scoped.get("/reef/ui")
    assert ">team-a</a>" in page.text and "shop" not in page.text
    assert "shop" not in scoped.get("/reef/ui/inbox").text
    assert scoped.get("/reef/ui/scenarios/shop").status_code == 403
    assert scoped.get("/reef/ui/scenarios/shop/releases/1").status_code == 403


def test_the_scenario_page_has_its_sections(server):
    page = _signed_in(server.url).get("/reef/ui/scenarios/shop")
    assert page.status_code == 200, page.text
    for section in ("summary", "feedback", "proposals", "chain", "jobs"):
        assert f'<section id="{section}"' in page.text
    assert "Promote r2" in page.text and "Reject r2" in page.text


def test_a_release_page_in_the_console_has_its_diff(server):
    page = _signed_in(server.url).get("/reef/ui/scenarios/shop/releases/2")
    assert page.status_code == 200, page.text
    assert "+Write a failing test first." in page.text
    assert 'href="/reef/ui/scenarios/shop"' in page.text
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    missing = _signed_in(server.url).get("/reef/ui/scenarios/shop/releases/9")
    assert missing.status_code == 404 and "r9" in missing.text


def test_a_write_without_the_csrf_token_is_refused_and_writes_nothing(server):
    client = _signed_in(server.url)
    before = scenarios.get("shop").chain().releases()
    for form in ({"release": "2"}, {"release": "2", "csrf": "forged"}):
        r = client.post("/reef/ui/scenarios/shop/promote", data=form)
        assert r.status_code == 403 and "CSRF" in r.text
    # the right token from another site's page: refused too
    csrf = _csrf(client.get("/reef/ui/inbox").text)
    r = client.post(
        "/reef/ui/scenarios/shop/promote",
        data={"release": "2", "csrf": csrf},
        headers={"origin": "https://evil.example"},
    )
    assert r.status_code == 403
    assert scenarios.get("shop").chain().releases() == before


def test_promote_from_the_inbox_publishes_and_serves(server):
    client = _signed_in(server.url)
    csrf = _csrf(client.get("/reef/ui/inbox").text)
    r = client.post("/reef/ui/scenarios/shop/promote", data={"release": "2", "csrf": csrf})
    assert r.status_code == 303, r.text
    assert r.headers["location"].startswith("/reef/ui/scenarios/shop?done=")
    chain = scenarios.get("shop").chain()
    assert chain.served().number == 3 and chain.served().meta.points_to == 2
    assert proposals.pending(scenarios.get("shop")) == []
    page = client.get(r.headers["location"])
    assert "r2 promoted: r3 is live" in page.text


def test_reject_from_the_inbox_keeps_the_chain(server):
    client = _signed_in(server.url)
    csrf = _csrf(client.get("/reef/ui/inbox").text)
    r = client.post(
        "/reef/ui/scenarios/shop/reject",
        data={"release": "2", "csrf": csrf, "reason": "too broad"},
    )
    assert r.status_code == 303, r.text
    assert proposals.states(scenarios.get("shop"))[2] == "rejected"
    assert len(scenarios.get("shop").chain().releases()) == 2


def test_a_scoped_session_cannot_write_elsewhere(server):
    client = _signed_in(server.url, LIMITED)
    csrf = _csrf(client.get("/reef/ui").text)
    r = client.post("/reef/ui/scenarios/shop/promote", data={"release": "2", "csrf": csrf})
    assert r.status_code == 403
    assert len(scenarios.get("shop").chain().releases()) == 2


def test_bad_input_is_a_page_that_names_the_fix(server):
    client = _signed_in(server.url)
    csrf = _csrf(client.get("/reef/ui").text)
    r = client.post("/reef/ui/scenarios/shop/promote", data={"release": "two", "csrf": csrf})
    assert r.status_code == 400 and "release: a release number" in r.text
    r = client.post("/reef/ui/scenarios/shop/reject", data={"release": "1", "csrf": csrf})
    assert r.status_code == 404  # r1 is no proposal
    r = client.get("/reef/ui/records", params={"min_score": "2"})
    assert r.status_code == 400 and "score at least" in r.text
    r = client.get("/reef/ui/records", params={"tag": "novalue"})
    assert r.status_code == 400 and "name=value" in r.text
    r = client.get("/reef/ui/scenarios/Bad Name")
    assert r.status_code == 400
    assert "Traceback" not in r.text
    assert len(scenarios.get("shop").chain().releases()) == 2


def test_a_script_may_use_its_bearer_token_without_csrf(server):
    auth = {"authorization": f"Bearer {TOKEN}"}
    r = httpx.post(
        server.url + "/reef/ui/scenarios/shop/promote", data={"release": "2"}, headers=auth
    )
    assert r.status_code == 303
    wrong = {"authorization": "Bearer nope"}
    assert httpx.get(server.url + "/reef/ui", headers=wrong).status_code == 401


def test_records_are_found_by_receipt_session_tag_and_score(server):
    auth = {"authorization": f"Bearer {TOKEN}"}
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    receipts = []
    for session, tag in (("s-1", "search"), ("s-2", "billing")):
        r = httpx.post(
            server.url + "/v1/chat/completions",
            json=chat,
            headers={**auth, "x-reef-session": session, "x-reef-tag-team": tag},
        )
        assert r.status_code == 200, r.text
        receipts.append(r.headers["x-reef-agent-record-id"])
    assert server.reef_app.state.recorder.flush(10)
    r = httpx.post(
        server.url + "/reef/report",
        json={"score": 1.0, "references": [receipts[0]]},
        headers=auth,
    )
    assert r.status_code == 201, r.text

    client = _signed_in(server.url)

    def shown(**query: str) -> set[str]:
        page = client.get("/reef/ui/records", params=query)
        assert page.status_code == 200, page.text
        return set(re.findall(r'href="/reef/ui/records/(rec_[0-9a-f]+)"', page.text))

    assert shown() == set(receipts)
    assert shown(receipt=receipts[1]) == {receipts[1]}
    assert shown(session="s-1") == {receipts[0]}
    assert shown(tag="team=billing") == {receipts[1]}
    assert shown(min_score="1") == {receipts[0]}
    assert shown(scenario="team-a") == set()
    page = client.get(f"/reef/ui/records/{receipts[0]}")
    assert page.status_code == 200 and "s-1" in page.text and "1.00" in page.text
    # a scoped token finds nothing of shop, even by its receipt
    scoped = _signed_in(server.url, LIMITED)
    page = scoped.get("/reef/ui/records", params={"receipt": receipts[0]})
    assert f'href="/reef/ui/records/{receipts[0]}"' not in page.text
    assert "No record matches." in page.text
    assert scoped.get(f"/reef/ui/records/{receipts[0]}").status_code == 404


def test_sign_out_ends_the_session(server):
    client = _signed_in(server.url)
    csrf = _csrf(client.get("/reef/ui").text)
    r = client.post("/reef/ui/logout", data={"csrf": csrf})
    assert r.status_code == 303
    assert client.get("/reef/ui").status_code == 303  # back to the sign-in


def test_only_the_console_files_are_served(server):
    assert httpx.get(server.url + "/reef/ui/static/console.js").status_code == 200
    assert httpx.get(server.url + "/reef/ui/static/..%2Fpages.py").status_code == 404
    assert httpx.get(server.url + "/reef/ui/static/pages.py").status_code == 404


def test_an_open_server_signs_the_loopback_user_in(home: Path):
    scenarios.create("shop")
    config = ServeConfig(upstream="http://127.0.0.1:9/v1")
    with ServerThread(create_app(config, tokens=None)) as reef:
        client = httpx.Client(base_url=reef.url)
        page = client.get("/reef/ui")
        assert page.status_code == 200 and ">shop</a>" in page.text
        assert "reef_console=" in page.headers["set-cookie"]
        # the session's CSRF token still guards writes
        r = client.post("/reef/ui/scenarios/shop/promote", data={"release": "1"})
        assert r.status_code == 403

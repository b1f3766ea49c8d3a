"""A token may write only into its own scenarios, and a refused request writes nothing.

Every mutating route of the app (read from the app itself, so a new one without a case
here fails ``test_every_mutating_route_has_a_case``) is sent with a token scoped to
``team-a`` but aimed at ``team-b`` (or at the default scenario), in every way a request
can name a scenario: path, body, ``x-reef-scenario``, referenced receipts. Each must
answer 403 (401 without a token; a receipt of team-b is answered as an unknown one, 400,
so it tells nothing about team-b) and leave the whole store as it was: records, reports,
scenarios, release chains (every git ref), jobs and every other file in the state dir.
A control sends the same request with the main token and sees the store change, so a
case cannot pass by never reaching a write.
"""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from reef_cli.core import scenarios
from reef_cli.core.publishing import publish_files
from reef_cli.server.app import create_app
from reef_cli.server.receipts import RECORD_HEADER
from reef_cli.server.serve_config import ServeConfig
from tests.fakes.jobs import KeptJobs
from tests.server.conftest import LIMITED, TOKEN, Stack

MAIN = {"authorization": f"Bearer {TOKEN}"}
SCOPED = {"authorization": f"Bearer {LIMITED}"}  # allowed for team-a only
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
RESPONSES = {"model": "m", "input": "hi"}
MESSAGES = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
KEPT = "rep-kept-1"  # a team-b report made at setup


@dataclass
class Setup:
    """What a case may refer to: a receipt recorded in each scenario."""

    receipt_a: str
    receipt_b: str


@dataclass
class Send:
    """One way to aim a request at a scenario the scoped token may not touch."""

    name: str
    build: Callable[[Setup], dict[str, Any]]  # httpx.request kwargs, less method/url/auth
    writes_with_main: bool = True  # the control: the main token's request does write
    path: str | None = None  # when the path itself names the scenario
    refused: int = 403  # the scoped token's answer

    def kwargs(self, setup: Setup, auth: dict[str, str] | None) -> dict[str, Any]:
        kw = self.build(setup)
        kw["headers"] = {**kw.get("headers", {}), **(auth or {})}
        return kw


def send(name: str, writes: bool = True, path: str | None = None, **fixed: Any) -> Send:
    return Send(name, lambda _s: dict(fixed), writes, path)


def report(
    name: str,
    refs: Callable[[Setup], list[str]],
    writes: bool = True,
    headers: dict[str, str] | None = None,
    refused: int = 403,
    **body: Any,
) -> Send:
    def build(s: Setup) -> dict[str, Any]:
        return {"json": {"score": 1.0, **body, "references": refs(s)}, "headers": headers or {}}

    return Send(name, build, writes, refused=refused)


def on(scenario: str) -> dict[str, str]:
    return {"x-reef-scenario": scenario}


# (method, path) -> the ways to send it. Paths are the app's route templates.
CASES: dict[tuple[str, str], list[Send]] = {
    ("POST", "/reef/report"): [
        report("header names team-b", lambda s: [], headers=on("team-b")),
        # a team-b receipt is unknown to the scoped token: 400, as for one never recorded
        report("a team-b receipt, no header", lambda s: [s.receipt_b], refused=400),
        report("a team-b receipt under team-a", lambda s: [s.receipt_b], False, on("team-a"), 400),
        report(
            "team-a and team-b receipts", lambda s: [s.receipt_a, s.receipt_b], False, None, 400
        ),
        report("no header, no receipt: the default scenario", lambda s: []),
        report("a team-b receipt, a new id", lambda s: [s.receipt_b], refused=400, id="rep-new-1"),
        report(
            "a team-b report resent", lambda s: [s.receipt_b], False, None, 400, score=0.5, id=KEPT
        ),
    ],
    ("POST", "/reef/scenarios"): [
        send("a new scenario", json={"name": "team-c"}),
        send("an existing one", False, json={"name": "team-b"}),
    ],
    ("PATCH", "/reef/scenarios/{scenario}"): [
        send("training mode", path="/reef/scenarios/team-b", json={"training_mode": "manual"}),
        send("description", path="/reef/scenarios/team-b", json={"description": "other"}),
    ],
    ("POST", "/reef/train"): [
        # this server runs no live loop: the main token's request is a 409, writing nothing
        send("scenario in the body", False, json={"scenario": "team-b"}),
        send("scenario in the header", False, json={}, headers=on("team-b")),
    ],
    ("DELETE", "/reef/scenarios/{scenario}"): [
        send("archive team-b", path="/reef/scenarios/team-b"),
        # (its control would find team-b archived by the first)
        send("forced", False, path="/reef/scenarios/team-b", params={"force": "true"}),
    ],
    ("POST", "/reef/scenarios/{scenario}/rollback"): [
        send("default target", path="/reef/scenarios/team-b/rollback", json={}),
        send("no body", False, path="/reef/scenarios/team-b/rollback"),
        send("to r1", path="/reef/scenarios/team-b/rollback", json={"to": 1}),
    ],
    ("POST", "/reef/scenarios/{scenario}/promote"): [
        send("latest", path="/reef/scenarios/team-b/promote", json={}),
        send("r1", path="/reef/scenarios/team-b/promote", json={"release": 1}),
    ],
    # the console: a script's bearer token, as a browser's session goes through the same
    # checks (tests/server/console/ tests the session and its CSRF token)
    ("POST", "/reef/ui/scenarios/{scenario}/promote"): [
        send("a form, r1", path="/reef/ui/scenarios/team-b/promote", data={"release": "1"}),
    ],
    ("POST", "/reef/ui/scenarios/{scenario}/reject"): [
        send("a form, r3", path="/reef/ui/scenarios/team-b/reject", data={"release": "3"}),
    ],
    ("POST", "/reef/ui/login"): [
        # a sign-in names no scenario: the scoped token in the header signs nobody in
        Send("no token in the form", lambda _s: {"data": {"next": "/reef/ui"}}, False, None, 401),
    ],
    ("POST", "/reef/ui/logout"): [
        send("a bearer token has no session", False, data={}),
    ],
    ("POST", "/reef/evolve"): [
        send("scenario in the body", json={"ask": "answer tersely", "scenario": "team-b"}),
        send("scenario in the header", json={"ask": "answer tersely"}, headers=on("team-b")),
        send("the default scenario", False, json={"ask": "answer tersely"}),
    ],
    ("POST", "/reef/harness/proposals"): [
        send(
            "scenario in the body",
            json={"scenario": "team-b", "reason": "r", "files": {"rules/b.md": "be brief\n"}},
        ),
        send(
            "scenario in the header",
            json={"reason": "r", "files": {"rules/b.md": "be brief\n"}},
            headers=on("team-b"),
        ),
    ],
    ("POST", "/reef/quickstart"): [
        send("scenario in the body", json={"scenario": "team-b"}),
        send("the default scenario", json={}),
    ],
    ("POST", "/v1/chat/completions"): [
        send("header names team-b", json=CHAT, headers=on("team-b")),
        send("the default scenario", json=CHAT),
    ],
    ("POST", "/v1/messages"): [
        send("header names team-b", json=MESSAGES, headers=on("team-b")),
        send("beta, the default scenario", json=MESSAGES, params={"beta": "true"}),
    ],
    ("POST", "/v1/responses"): [
        send("header names team-b", json=RESPONSES, headers=on("team-b")),
        send("the default scenario", json=RESPONSES),
    ],
    ("POST", "/v1/embeddings"): [
        send("header names team-b", json={"model": "e", "input": "hi"}, headers=on("team-b")),
        send("the default scenario", json={"model": "e", "input": "hi"}),
    ],
    ("POST", "/v1/messages/count_tokens"): [
        send("header names team-b", False, json=MESSAGES, headers=on("team-b")),
    ],
}


def app_routes(app: Any) -> set[tuple[str, str]]:
    """(method, path) of every route the app answers: its fast inference routes and every
    route of the FastAPI app, included routers and mounts too."""
    found: set[tuple[str, str]] = set(app.fast)

    def walk(routes: list[Any], prefix: str) -> None:
        for route in routes:
            if hasattr(route, "original_router"):  # FastAPI's include_router (0.16x)
                walk(route.original_router.routes, prefix + route.include_context.prefix)
            elif getattr(route, "routes", None) is not None:  # a Mount or sub-router
                walk(route.routes, prefix + getattr(route, "path", ""))
            else:
                for method in getattr(route, "methods", None) or ():
                    found.add((method, prefix + route.path))

    walk(app.api.routes, "")
    return found


def test_every_mutating_route_has_a_case(home: Path) -> None:
    app = create_app(ServeConfig(upstream="http://127.0.0.1:9/v1"), tokens=None)
    routes = app_routes(app)
    assert ("POST", "/reef/report") in routes and ("GET", "/healthz") in routes
    openapi = set(app.api.openapi()["paths"])
    assert openapi <= {path for _m, path in routes}, "the route walk missed an API route"
    mutating = {(m, p) for m, p in routes if m not in SAFE_METHODS}
    missing = sorted(mutating - set(CASES))
    assert not missing, f"mutating routes with no scoped-token case in CASES: {missing}"
    stale = sorted(set(CASES) - mutating)
    assert not stale, f"CASES for routes the app no longer has: {stale}"


# ------------------------------------------------------------------ the store


def _files(root: Path) -> dict[str, str]:
    """Every file under the state dir but the database (compared by content below)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.name.startswith("records.sqlite3"):
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _tables(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(db)
    try:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        return {n: sorted(conn.execute(f"SELECT * FROM {n}").fetchall(), key=repr) for n in names}
    finally:
        conn.close()


def _refs(root: Path) -> dict[str, str]:
    out = {}
    for chain in sorted((root / "scenarios").glob("*/chain.git")):
        listing = subprocess.run(
            ["git", "--git-dir", str(chain), "for-each-ref", "--format=%(refname) %(objectname)"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        out[chain.parent.name] = listing
    return out


@dataclass
class Snapshot:
    tables: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)


def snapshot(stack: Stack) -> Snapshot:
    stack.flush()  # a record the server accepted is in the database before we look
    return Snapshot(_tables(stack.home / "records.sqlite3"), _refs(stack.home), _files(stack.home))


def _receipt(stack: Stack, scenario: str) -> str:
    r = httpx.post(stack.url + "/v1/chat/completions", json=CHAT, headers={**MAIN, **on(scenario)})
    assert r.status_code == 200, r.text
    return r.headers[RECORD_HEADER]


@pytest.fixture
def setup(make_stack: Callable[..., Stack]) -> tuple[Stack, Setup]:
    stack = make_stack("openai")
    stack.app.state.jobs = KeptJobs()  # runs none: the job file is the write we look for
    for name in ("team-a", "team-b"):
        chain = scenarios.create(name, "d").chain()
        chain.publish({"rules/a.md": "one\n"})
        chain.publish({"rules/a.md": "two\n"})
    # a proposal of team-b's for the console's reject
    publish_files("team-b", {"rules/a.md": "three\n"}, reason="proposal", hold="review")
    made = Setup(_receipt(stack, "team-a"), _receipt(stack, "team-b"))
    r = httpx.post(
        stack.url + "/reef/report",
        json={"score": 0.5, "references": [made.receipt_b], "id": KEPT},
        headers=MAIN,
    )
    assert r.status_code == 201, r.text
    return stack, made


@pytest.mark.parametrize("route", sorted(CASES), ids=[f"{m} {p}" for m, p in sorted(CASES)])
def test_scoped_token_writes_nothing_outside_its_scenarios(
    setup: tuple[Stack, Setup], route: tuple[str, str]
) -> None:
    stack, made = setup
    method, template = route
    before = snapshot(stack)
    assert before.tables["records"] and before.tables["reports"] and before.refs
    for case in CASES[route]:
        url = stack.url + (case.path or template)
        for auth, status in ((SCOPED, case.refused), (None, 401)):
            r = httpx.request(method, url, **case.kwargs(made, auth))
            who = "scoped token" if auth else "no token"
            assert r.status_code == status, f"{case.name} ({who}): {r.status_code} {r.text}"
            after = snapshot(stack)
            assert after == before, f"{case.name} ({who}) changed the store"
    # The controls: the same requests with the main token reach a write.
    for case in CASES[route]:
        if not case.writes_with_main:
            continue
        url = stack.url + (case.path or template)
        r = httpx.request(method, url, **case.kwargs(made, MAIN))
        # a console form answers 303 to the page that shows what it did
        ok = r.is_success or r.is_redirect
        assert ok, f"{case.name} (main token): {r.status_code} {r.text}"
        after = snapshot(stack)
        assert after != before, f"{case.name}: the main token's request wrote nothing"
        before = after


def test_report_for_an_allowed_scenario_still_works(setup: tuple[Stack, Setup]) -> None:
    stack, made = setup
    r = httpx.post(
        stack.url + "/reef/report",
        json={"score": 2, "references": [made.receipt_a]},
        headers=SCOPED,
    )
    assert r.status_code == 201 and r.json()["scenario"] == "team-a", r.text
    r = httpx.post(
        stack.url + "/reef/report", json={"feedback": "ok"}, headers={**SCOPED, **on("team-a")}
    )
    assert r.status_code == 201 and r.json()["scenario"] == "team-a", r.text

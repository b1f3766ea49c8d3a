"""The console end to end in a real headless Chromium (issue 27's acceptance): a real
`reef serve` app on a real port with its job worker, a scripted model for the gate's
judge and a fake upstream behind the proxy; the browser is driven through the DevTools
protocol (tests/chromium.py) with real mouse and key events.

One walk through the console, as a person would take it: sign in, the scenario list, a
scenario's feedback curve, an agent's proposal gated by a job followed live to its end,
the promote from the inbox (the next proxied request carries the new release), the new
release's page with its diff and curve, a write without the CSRF token refused, keyboard
navigation, and a scenario token's console. No page may log a console error (a CSP
violation is one). Each page's screenshot is kept as a test artefact."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from reef_cli.core import scenarios
from reef_cli.core.publishing import publish_files
from reef_cli.core.tokens import ScopedToken, TokenSet, digest
from tests.chromium import Browser, needs_chromium, png_is_blank
from tests.fakes.scripted import Scripted
from tests.fakes.server_thread import ServerThread
from tests.fakes.upstream import FakeUpstream

pytestmark = needs_chromium

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "reef_console_token_0123456789"
LIMITED = "reef_console_team_a_abcdef"
MAIN = {"authorization": f"Bearer {TOKEN}"}
RULE = "rules/style.md"
TESTS_RULE = "rules/tests-first.md"
NEW_RULE_TEXT = "When you fix a bug, first write a test that fails because of it."
CHAT = {"model": "m", "messages": [{"role": "user", "content": "fix the bug"}]}


# read at import: the reef_home fixture clears every REEF_ variable before a test runs
ARTEFACTS_BASE = os.environ.get("REEF_TEST_ARTEFACTS")


def artefacts() -> Path:
    """Where screenshots go: $REEF_TEST_ARTEFACTS/console, else test-artefacts/console in
    the checkout (git ignores it), so a CI run leaves them to look at."""
    base = ARTEFACTS_BASE
    folder = (Path(base) if base else ROOT / "test-artefacts") / "console"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class Console:
    """The browser on one console, with the checks every page gets."""

    def __init__(self, browser: Browser, base: str) -> None:
        self.browser, self.base = browser, base
        self.shots: list[Path] = []

    def open(self, path: str, status: int = 200) -> None:
        self.browser.goto(self.base + path)
        assert self.browser.last_status() == status, (path, self.browser.text("main"))

    def shoot(self, name: str, sections: list[str]) -> None:
        """A screenshot of the page and one of each section, none of them blank."""
        shot = self.browser.screenshot(artefacts() / f"{name}.png")
        assert not png_is_blank(shot), shot
        self.shots.append(shot)
        for section in sections:
            part = self.browser.screenshot(
                artefacts() / f"{name}-{section}.png", selector=f"section#{section}"
            )
            assert not png_is_blank(part), part
            self.shots.append(part)

    def no_errors(self) -> None:
        assert self.browser.console_errors() == []


@pytest.fixture
def served(reef_home: Path, scripted: Scripted, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from recipes.engine.worker import Worker
    from reef_cli.server.app import create_app
    from reef_cli.server.serve_config import ServeConfig

    monkeypatch.setenv("REEF_MODEL", "openai/scripted")  # the gate's judge (the job's child)
    monkeypatch.setenv("REEF_API_BASE", scripted.api_base)
    scenarios.create("shop", "the web shop's agents")
    scenarios.create("team-a", "team A")
    publish_files("shop", {RULE: "Prefer small, tested changes.\n"}, reason="start")
    publish_files("team-a", {RULE: "Team A's rule.\n"}, reason="start")
    fake = FakeUpstream()
    with ServerThread(fake.app) as upstream:
        config = ServeConfig(
            upstream=upstream.url + "/v1", default_scenario="shop", release_cache_seconds=0
        )
        scoped = [ScopedToken("team-a", digest(LIMITED).hex(), ("team-a",))]
        app = create_app(config, tokens=TokenSet(TOKEN, scoped), jobs=Worker())
        with ServerThread(app) as reef:
            yield reef, app


def _feedback(url: str, app: Any, scores: list[float]) -> None:
    """Sessions through the proxy, each reported with a score: the scenario's curve."""
    receipts = []
    for i, _ in enumerate(scores):
        r = httpx.post(
            url + "/v1/chat/completions",
            json=CHAT,
            headers={**MAIN, "x-reef-session": f"session-{i}", "x-reef-tag-team": "shop"},
        )
        assert r.status_code == 200, r.text
        receipts.append(r.headers["x-reef-agent-record-id"])
    assert app.state.recorder.flush(10)
    for receipt, score in zip(receipts, scores, strict=True):
        r = httpx.post(
            url + "/reef/report", json={"score": score, "references": [receipt]}, headers=MAIN
        )
        assert r.status_code == 201, r.text


def _sign_in(console: Console, token: str) -> None:
    browser = console.browser
    console.open("/reef/ui")  # no session: the sign-in form
    assert browser.exists('input[name="token"]')
    browser.type_text('input[name="token"]', token)
    browser.press("Enter")
    browser.wait_for_load()
    assert browser.last_status() == 200
    cookie = next(c for c in browser.cookies() if c["name"] == "reef_console")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and token not in cookie["value"]


def test_the_console_end_to_end(served: Any, scripted: Scripted) -> None:
    reef, app = served
    _feedback(reef.url, app, [0.0, 1.0, 0.0, 1.0])
    with Browser() as browser:
        console = Console(browser, reef.url)
        _sign_in(console, TOKEN)

        # the scenario list
        console.open("/reef/ui")
        assert browser.texts("#scenarios tbody tr td:first-child") == ["shop", "team-a"]
        console.shoot("scenarios", ["scenarios"])
        console.no_errors()

        # keyboard: the first Tab stop skips to the content, the next ones are the links
        browser.evaluate("document.activeElement.blur()")
        browser.press("Tab")
        assert browser.focused()["text"] == "Skip to content"
        for expected in ("Reef", "Scenarios", "Inbox"):
            browser.press("Tab")
            assert browser.focused()["text"] == expected
        browser.press("Enter")  # follows the focused link
        browser.wait_for_load()
        assert browser.evaluate("location.pathname") == "/reef/ui/inbox"
        browser.press("Shift+Tab")  # backwards from the top: the last stop, signing out
        assert browser.focused()["text"] == "Sign out"

        # a scenario: its feedback curve, chain, proposals and jobs
        console.open("/reef/ui/scenarios/shop")
        assert browser.exists("#feedback img.plot")
        console.shoot("scenario", ["summary", "feedback", "chain"])
        console.no_errors()

        # an agent proposes a change; the job gates it (its judge answers after 3 s) and
        # the job page follows it live to its end
        scripted.push_judge(0.95, stall=3.0)
        proposal = {
            "scenario": "shop",
            "reason": "reproduce a bug with a failing test before fixing it",
            "files": {TESTS_RULE: NEW_RULE_TEXT + " Run it before and after the fix.\n"},
        }
        r = httpx.post(reef.url + "/reef/harness/proposals", json=proposal, headers=MAIN)
        assert r.status_code == 202, r.text
        job_id = r.json()["id"]
        console.open(f"/reef/ui/jobs/{job_id}")
        assert browser.exists("[data-follow]")  # still running: the page follows it
        browser.wait_until(
            "document.querySelector('[data-state]') &&"
            " document.querySelector('[data-state]').textContent === 'running'",
            timeout=30,
        )
        console.shoot("job-running", ["progress"])
        # the script reloads the page when the job ends: the outcome, no more following
        browser.wait_until(
            "!document.querySelector('[data-follow]') && !!document.querySelector('#outcome')",
            timeout=60,
        )
        assert "pending" in browser.text("#progress")
        console.shoot("job-done", ["progress", "outcome"])
        console.no_errors()
        pending = json.loads(browser.text("#outcome pre"))["release"]

        # a write without the CSRF token is refused, and changes nothing
        status = browser.evaluate(
            f"fetch('/reef/ui/scenarios/shop/promote', {{method: 'POST', "
            f"headers: {{'content-type': 'application/x-www-form-urlencoded'}}, "
            f"body: 'release={pending}'}}).then(r => r.status)"
        )
        assert status == 403
        assert scenarios.get("shop").chain().served().number == 1

        # promote from the inbox, with a real click
        console.open("/reef/ui/inbox")
        console.shoot("inbox", ["inbox"])
        browser.click('#inbox button[type="submit"]:not(.danger)')
        browser.wait_for_load()
        assert browser.evaluate("location.pathname") == "/reef/ui/scenarios/shop"
        assert f"r{pending} promoted" in browser.text(".flash")
        live = scenarios.get("shop").chain().served()
        assert live.meta.points_to == pending
        r = httpx.post(
            reef.url + "/v1/chat/completions",
            json=CHAT,
            headers={**MAIN, "x-reef-scenario": "shop"},
        )
        assert r.status_code == 200 and r.headers["x-reef-release-id"] == str(live.number)
        console.no_errors()

        # the proposal's release page: its diff against the release before, the curve
        console.open(f"/reef/ui/scenarios/shop/releases/{pending}")
        assert NEW_RULE_TEXT in browser.text("#changes")
        assert browser.exists("#feedback img.plot")
        console.shoot("release", ["changes", "feedback"])
        console.no_errors()

        # the records: a search by tag
        console.open("/reef/ui/records?tag=team%3Dshop")
        assert len(browser.texts("#results tbody tr")) == 4
        console.shoot("records", ["search", "results"])
        console.no_errors()

        # sign out
        browser.click('header button[type="submit"]')
        browser.wait_for_load()
        assert browser.evaluate("location.pathname") == "/reef/ui/login"

        # a scenario token's console: team-a only
        _sign_in(console, LIMITED)
        console.open("/reef/ui")
        assert browser.texts("#scenarios tbody tr td:first-child") == ["team-a"]
        console.shoot("scoped", ["scenarios"])
        console.no_errors()
        console.open("/reef/ui/inbox")
        assert "shop" not in browser.text("main")
        console.no_errors()
        console.open("/reef/ui/scenarios/shop", status=403)  # (the browser logs the 403)
        assert "not allowed for scenario 'shop'" in browser.text("main")
    assert all(shot.stat().st_size > 0 for shot in console.shots)

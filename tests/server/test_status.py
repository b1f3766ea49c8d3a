"""``GET /reef/status`` (issue 27, item 4): version, uptime, served releases and the live
loop; the whole server's settings only for a token for every scenario, passwords masked."""

from __future__ import annotations

import httpx

from reef_cli import __version__
from reef_cli.core import learning_state, scenarios
from reef_cli.core.publishing import publish_files
from tests.server.conftest import LIMITED, TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}"}


def _status(stack, headers=AUTH) -> httpx.Response:
    return httpx.get(stack.url + "/reef/status", headers=headers)


def test_the_main_token_sees_everything(make_stack):
    stack = make_stack("openai", default_scenario="shop")
    for name in ("shop", "team-a"):
        scenarios.create(name)
    publish_files("shop", {"rules/style.md": "Prefer small changes.\n"}, reason="start")
    learning_state.save(
        scenarios.get("shop").path,
        learning_state.LearningState(
            "shop", checked_at="2026-12-03T00:00:00Z", next_trigger={"waits_for": "sessions"}
        ),
    )
    r = _status(stack)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["version"] == __version__
    assert body["uptime_s"] >= 0 and body["started_at"].endswith("Z")
    assert body["default_scenario"] == "shop" and body["recording"] is True
    assert body["live_loop"] == {"enabled": False, "recipe": None}
    shop = {s["name"]: s for s in body["scenarios"]}["shop"]
    assert shop["served"] == 1 and shop["latest"] == 1
    assert shop["learning"]["next_trigger"] == {"waits_for": "sessions"}
    assert shop["learning"]["enabled"] is False
    assert body["store"]["backend"] == "sqlite"
    assert body["upstream"]["dialect"] == "openai"
    assert body["config"]["port"] == stack.app.state.config.port
    assert body["replica"]


def test_a_scenario_token_sees_its_scenarios_and_no_settings(make_stack):
    stack = make_stack("openai")
    for name in ("default", "team-a", "team-b"):
        scenarios.get_or_create(name)
    body = _status(stack, {"authorization": f"Bearer {LIMITED}"}).json()
    assert [s["name"] for s in body["scenarios"]] == ["team-a"]
    for whole_server in ("store", "upstream", "config", "replica"):
        assert whole_server not in body


def test_no_token_no_status(make_stack):
    stack = make_stack("openai")
    assert _status(stack, {}).status_code == 401
    assert _status(stack, {"authorization": "Bearer wrong"}).status_code == 401


def test_passwords_never_leave(make_stack):
    stack = make_stack("openai")
    stack.app.state.store.url = "postgresql://reef:store-secret@db.internal/reef"
    text = _status(stack).text
    assert "store-secret" not in text
    assert _status(stack).json()["store"] == {
        "backend": "postgresql",
        "url": "postgresql://reef:***@db.internal/reef",
    }

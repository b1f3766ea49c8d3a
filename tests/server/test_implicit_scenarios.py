"""Which requests may create a scenario: a typo in ``x-reef-scenario`` must not add one.

The main token creates an unknown scenario on first use while
``allow_implicit_scenario_creation`` is on (the default, as docs/api.md has always said);
off, or for any scenario token, an unknown scenario is a 404 in the caller's dialect that
names the scenario and the setting, and nothing is written or sent upstream.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from reef_cli.core import paths, scenarios
from reef_cli.core.errors import ScenarioNotFound
from reef_cli.server import serve_config
from reef_cli.server.release_cache import ReleaseCache
from tests.server.conftest import LIMITED, ROUTE_BODIES, TOKEN

MAIN = {"authorization": f"Bearer {TOKEN}"}
SCOPED = {"authorization": f"Bearer {LIMITED}"}  # may use team-a only


def post(stack, path: str, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(stack.url + path, json=ROUTE_BODIES[path], headers=headers, timeout=10)


def message_of(response: httpx.Response) -> str:
    return str(response.json()["error"]["message"])


def exists(name: str) -> bool:
    return (paths.scenarios_dir() / name).exists()


def test_main_token_creates_on_first_use_by_default(make_stack):
    stack = make_stack("openai")
    r = post(stack, "/v1/chat/completions", {**MAIN, "x-reef-scenario": "brand-new"})
    assert r.status_code == 200
    assert scenarios.get("brand-new").name == "brand-new"


@pytest.mark.parametrize("path", list(ROUTE_BODIES))
def test_off_an_unknown_scenario_is_a_404_naming_it_and_the_setting(make_stack, path):
    stack = make_stack("openai", allow_implicit_scenario_creation=False)
    r = post(stack, path, {**MAIN, "x-reef-scenario": "shopp"})
    assert r.status_code == 404
    text = message_of(r)
    assert "unknown scenario 'shopp'" in text
    assert "allow_implicit_scenario_creation" in text and "reef scenario create shopp" in text
    assert not exists("shopp") and stack.fake.log == []
    if path == "/v1/messages":
        assert r.json()["type"] == "error"  # Anthropic-shaped
    scenarios.create("shop")
    assert post(stack, path, {**MAIN, "x-reef-scenario": "shop"}).status_code == 200


def test_off_the_default_scenario_is_not_created_either(make_stack):
    stack = make_stack("openai", allow_implicit_scenario_creation=False)
    r = post(stack, "/v1/chat/completions", MAIN)
    assert r.status_code == 404 and "unknown scenario 'default'" in message_of(r)
    assert not exists("default")


@pytest.mark.parametrize("allow", [True, False])
def test_a_scenario_token_never_creates(make_stack, allow):
    stack = make_stack("anthropic", allow_implicit_scenario_creation=allow)
    for path in ROUTE_BODIES:
        r = post(stack, path, {**SCOPED, "x-reef-scenario": "team-a"})
        assert r.status_code == 404, path
        assert "unknown scenario 'team-a'" in message_of(r)
    assert not exists("team-a") and stack.fake.log == []
    scenarios.create("team-a")
    assert post(stack, "/v1/messages", {**SCOPED, "x-reef-scenario": "team-a"}).status_code == 200


def test_the_release_cache_only_reads(home: Path):
    """Reading releases never creates a scenario, however many reads race, and a
    background refresh never brings back a scenario deleted meanwhile: creating is the
    proxy's one rule, on its write path."""

    async def run() -> None:
        cache = ReleaseCache(ttl=1.0)
        both = await asyncio.gather(
            cache.releases("racy"), cache.releases("racy"), return_exceptions=True
        )
        assert all(isinstance(one, ScenarioNotFound) for one in both)
        assert not exists("racy")
        scenarios.create("kept")
        assert (await cache.releases("kept")).served is None
        scenarios.delete("kept")
        await asyncio.sleep(1.1)  # past the ttl: the next read refreshes in the background
        await cache.releases("kept")
        await asyncio.sleep(0.2)
        assert not exists("kept")

    asyncio.run(run())


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("allow_implicit_scenario_creation: false\n", False),
        ("allow-implicit-scenario-creation: false\n", False),
        ("upstream: http://127.0.0.1:9/v1\n", True),
    ],
)
def test_serve_yaml_sets_it(tmp_path: Path, text: str, want: bool):
    path = tmp_path / "serve.yaml"
    path.write_text(text)
    assert serve_config.build(serve_config.load_file(path)).allow_implicit_scenario_creation is want


def test_serve_yaml_refuses_a_wrong_type(tmp_path: Path):
    from reef_cli.core.errors import ServeError

    path = tmp_path / "serve.yaml"
    path.write_text("allow_implicit_scenario_creation: [1]\n")
    with pytest.raises(ServeError, match="allow_implicit_scenario_creation"):
        serve_config.build(serve_config.load_file(path))

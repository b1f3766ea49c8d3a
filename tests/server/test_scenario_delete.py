"""``DELETE /reef/scenarios/{s}`` (issue 27, item 4): a scenario is archived, never
destroyed; refused while a job of it runs, and while an agent is installed from it unless
forced; a bad name or an unknown scenario is one line and archives nothing."""

from __future__ import annotations

from pathlib import Path

import httpx

from reef_cli.core import installs, jobs, paths, scenarios
from reef_cli.core.publishing import publish_files
from tests.cli.helpers import reef, reef_fails
from tests.server.conftest import LIMITED, TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}"}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _delete(stack, name: str, headers=AUTH, **params) -> httpx.Response:
    return httpx.delete(f"{stack.url}/reef/scenarios/{name}", headers=headers, params=params)


def _shop() -> scenarios.Scenario:
    found = scenarios.create("shop")
    publish_files(found, {"rules/style.md": "Prefer small changes.\n"}, reason="start")
    return found


def test_archived_then_restored_with_its_chain(make_stack):
    stack = make_stack("openai")
    _shop()
    r = _delete(stack, "shop")
    assert r.status_code == 200, r.text
    archived = r.json()["archived"]
    assert r.json()["scenario"] == "shop" and archived.startswith("shop-")
    assert "shop" not in [s.name for s in scenarios.list_all()]
    assert (paths.archive_dir() / archived).is_dir()
    got = httpx.get(stack.url + "/reef/harness", params={"scenario": "shop"}, headers=AUTH)
    assert got.status_code == 404  # nothing of it is served any more
    back = scenarios.restore(archived)
    assert back.chain().served().number == 1  # the chain came back whole


def test_in_use_refusals(make_stack):
    stack = make_stack("openai")
    _shop()
    installs.record("shop", "pi", Path("/tmp/pi-agent"), 1, "h")
    r = _delete(stack, "shop")
    assert r.status_code == 409
    assert "installed in pi" in r.json()["error"]["message"]
    assert "force" in r.json()["error"]["hint"]
    assert "shop" in [s.name for s in scenarios.list_all()]
    job = jobs.save(jobs.create("shop", "skillclaw", None))
    r = _delete(stack, "shop", force="true")
    assert r.status_code == 409 and "queued job" in r.json()["error"]["message"]
    jobs.fail(job, "done with it")
    assert _delete(stack, "shop", force="true").status_code == 200


def test_bad_input_archives_nothing(make_stack):
    stack = make_stack("openai")
    _shop()
    assert _delete(stack, "Not_Kebab").status_code == 400
    assert _delete(stack, "nope").status_code == 404
    assert _delete(stack, "shop", force="maybe").status_code == 400
    assert _delete(stack, "shop", headers={}).status_code == 401
    limited = {"authorization": f"Bearer {LIMITED}"}
    assert _delete(stack, "shop", headers=limited).status_code == 403
    assert "shop" in [s.name for s in scenarios.list_all()]
    assert not paths.archive_dir().exists() or not any(paths.archive_dir().iterdir())


def test_the_cli_shares_the_rule():
    _shop()
    installs.record("shop", "pi", Path("/tmp/pi-agent"), 1, "h")
    line = reef_fails("scenario", "delete", "shop")
    assert "installed in pi" in line and "--force" in line
    assert "Archived scenario shop" in reef("scenario", "delete", "shop", "--force")

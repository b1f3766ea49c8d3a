"""A recipe registered by entry point, from a package outside Reef, works everywhere a
built-in does: `reef evolve` (help, a run, --schedule), POST /reef/evolve, the live loop.

The package is CONTRIBUTING.md's worked example, read from the page: written to a
temporary directory with its own ``*.dist-info`` (the metadata pip would write), put on
``sys.path`` and ``PYTHONPATH``; no file of Reef's is touched. Its recipe proposes one rule
that makes the scripted model (tests/recipes/gepa_model.py) answer the task set's sums as
the scorer wants, so the gate's paired evaluation on the test split publishes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from recipes.engine import recipe_named
from reef_cli.core import jobs, plugins, scenarios
from reef_cli.core.errors import OptionInvalid
from reef_cli.core.publishing import publish_files
from reef_cli.core.tree import starter_tree
from reef_cli.server.receipts import RELEASE_HEADER
from tests.cli.helpers import reef, reef_fails
from tests.contributing import install
from tests.recipes.gepa.test_gepa import sums
from tests.recipes.gepa_model import Sums
from tests.server.conftest import TOKEN, home  # noqa: F401  (home: a fixture)
from tests.server.test_learning import live, wait_for  # noqa: F401  (live: a fixture)


@pytest.fixture
def dummy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The plugin package, importable here and in every child process."""
    site = tmp_path / "site"
    install(site, "dummy_recipe", "dummy-recipe")
    monkeypatch.syspath_prepend(str(site))
    inherited = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), inherited])))
    plugins.forget()
    yield site
    plugins.forget()  # read again once the path is gone


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sums]:
    scripted = Sums()
    with scripted.server:
        monkeypatch.setenv("REEF_MODEL", "openai/scripted")
        monkeypatch.setenv("REEF_API_BASE", scripted.api_base)
        yield scripted


def scenario_with_tasks(name: str) -> Path:
    scenarios.create(name)
    publish_files(name, starter_tree().files(), reason="start")
    path = scenarios.get(name).path / "tasks.yaml"
    path.write_text(json.dumps(sums().model_dump(exclude_none=True)))
    return path


def served(name: str) -> dict[str, str]:
    chain = scenarios.get(name).chain()
    release = chain.served()
    assert release is not None
    return chain.files(release)


def test_the_registry_lists_it_after_reefs_own(dummy: Path) -> None:
    assert plugins.recipe_names() == ("gepa", "meta-harness", "reefine", "skillclaw", "dummy")
    assert plugins.recipe_names(unattended=True)[-1] == "dummy"
    assert type(recipe_named("dummy")).__name__ == "Dummy"
    with pytest.raises(OptionInvalid, match="dummy has no option depth"):
        recipe_named("dummy", {"depth": 2})


def test_reef_evolve_runs_it_and_its_help_names_it(dummy: Path, model: Sums) -> None:
    scenario_with_tasks("demo")
    shown = reef("evolve", "--help")
    assert "dummy (adds the answer-format rule)" in " ".join(shown.split())
    crontab = reef("evolve", "--recipe", "dummy", "-s", "demo", "--schedule", "nightly")
    assert "evolve --recipe dummy -s demo --yes" in crontab
    # a real `reef` process: the plugin comes from PYTHONPATH, as an installed one would
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "reef_cli",
            "evolve",
            "--recipe=dummy",
            "-s",
            "demo",
            "-y",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert (outcome["state"], outcome["release"]) == ("published", 2), outcome
    assert "rules/answer-format.md" in served("demo")


def test_an_unknown_recipe_names_the_registered_ones(dummy: Path) -> None:
    line = reef_fails("evolve", "fix it", "--recipe", "nope", "-s", "nowhere", code=2)
    assert "unknown recipe 'nope'" in line and "dummy" in line


def test_post_reef_evolve_and_the_live_loop_run_it(dummy: Path, model: Sums, live) -> None:  # noqa: F811
    from recipes.engine.worker import Worker

    scenario_with_tasks("shop")
    scenario_with_tasks("team")
    stack = live(Worker(), recipe="dummy", min_interval_s=0, scenarios=["shop"])
    # the live loop: a full batch of sessions starts the plugin's recipe
    for name in ("s1", "s2", "s3"):
        stack.session("shop", name)
    wait_for(
        lambda: (stack.state("shop")["last_run"] or {}).get("state") not in (None, *jobs.ACTIVE),
        "the live loop's run",
        deadline_s=240,
    )
    run = stack.state("shop")["last_run"]
    assert (run["recipe"], run["state"], run["release"]) == ("dummy", "published", 2), run
    assert stack.chat("shop", None, "next").headers[RELEASE_HEADER] == "2"
    # POST /reef/evolve on another scenario
    auth = {"authorization": f"Bearer {TOKEN}"}
    body = {"recipe": "dummy", "scenario": "team"}
    queued = httpx.post(stack.url + "/reef/evolve", json=body, headers=auth, timeout=30)
    assert queued.status_code == 202, queued.text
    job = queued.json()["id"]

    def ended() -> dict[str, object] | None:
        found = httpx.get(f"{stack.url}/reef/jobs/{job}", headers=auth, timeout=30).json()
        return found if found["state"] not in jobs.ACTIVE else None

    found = wait_for(ended, "the POSTed job", deadline_s=240)
    assert (found["state"], found["release"]) == ("published", 2), found
    assert "rules/answer-format.md" in served("team")
    # an unknown recipe is a one-line 400 naming the registered ones, and no job
    bad = httpx.post(stack.url + "/reef/evolve", json={"recipe": "nope"}, headers=auth)
    assert bad.status_code == 400 and "dummy" in bad.json()["error"]["message"], bad.text

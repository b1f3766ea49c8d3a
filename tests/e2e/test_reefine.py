"""Reefine end to end: the real pi, in the real sandbox, through a real recording proxy.

- with a scripted model (deterministic): in-process, and through `reef-pi evolve --wait`
  against a background `reef serve` job;
- with the embedded model: the README's main command, `reef quickstart`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from recipes import engine
from reef_cli.core import scenarios, tools
from reef_cli.core.budget import Budget
from reef_cli.core.llm import ModelClient
from reef_cli.core.publishing import publish_files
from reef_cli.core.records import RecordStore
from reef_cli.core.tree import starter_tree
from tests.fakes.scripted import Scripted, draft_json

pytestmark = pytest.mark.skipif(
    tools.find("pi") is None, reason="pi is not installed (scripts/install_agents.sh installs it)"
)
ASK = "when I ask you to fix a bug, reproduce it with a failing test first"
MARKER = "reef-e2e-7c1d"
REPO = Path(__file__).resolve().parents[2]


def test_reefine_with_real_pi_in_the_sandbox_and_a_scripted_model(scripted: Scripted) -> None:
    scenarios.create("demo")
    publish_files("demo", starter_tree().files(), reason="start")
    scripted.push(draft_json())  # the draft; pi's own request then gets the default answer
    model = ModelClient("openai/scripted", api_base=scripted.api_base, budget=Budget(max_calls=10))
    with engine.PiRunner("demo", model) as runner:
        outcome = engine.run(
            "demo", engine.recipe_named("reefine"), model=model, ask=ASK, runner=runner
        )
    assert outcome.state == "published", outcome.message
    trial = outcome.evidence["trial"]
    assert trial["loaded"] is True and trial["returncode"] == 0
    assert trial["sandbox"] == "bwrap"
    assert "failing test" in trial["answer_excerpt"]
    # pi's request reached the model with the new rule in it, and was recorded
    pi_requests = [
        e
        for e in scripted.inference()
        if MARKER in json.dumps(e.body) and "response_format" not in e.body
    ]
    assert pi_requests, "the rule text never reached the model"
    records = RecordStore().list(session_id=trial["session_id"], limit=None)
    assert {r.id for r in records} == set(trial["receipts"])
    assert all(r.scenario == "demo" for r in records)
    meta = scenarios.get("demo").chain().get(outcome.release).meta.model_dump()
    assert meta["trial"]["receipts"] == trial["receipts"]
    assert meta["budget"]["calls"] >= 2  # the draft + the agent's own call(s)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_reef_pi_evolve_runs_as_a_background_serve_job(scripted: Scripted, reef_home: Path) -> None:
    env = {
        **os.environ,
        "REEF_MODEL": "openai/scripted",
        "REEF_API_BASE": scripted.api_base,
        "REEF_SERVE_PORT": str(_free_port()),
        "REEF_SCENARIO": "team",
    }
    scenarios.create("team")
    publish_files("team", starter_tree().files(), reason="start")
    scripted.push(draft_json())
    bin_dir = Path(sys.executable).parent
    try:
        done = subprocess.run(
            [str(bin_dir / "reef-pi"), "evolve", ASK, "--wait"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "queued" in done.stdout and "published r2" in done.stdout
        job_id = done.stdout.split("job ")[1].split()[0]
        job = json.loads((reef_home / "jobs" / f"{job_id}.json").read_text())
        assert job["state"] == "published" and job["outcome"]["evidence"]["trial"]["loaded"]
    finally:
        subprocess.run(
            [sys.executable, "-c", "from reef_cli.core import serve_process as s; s.stop()"],
            env=env,
            timeout=30,
        )


@pytest.mark.skipif(
    __import__("reef_cli.core.embedded", fromlist=["x"]).gguf_path() is None,
    reason="the embedded model is not installed (./install.sh installs it)",
)
def test_quickstart_on_the_embedded_model(reef_home: Path) -> None:
    """The README's main command: no key, no network, the embedded model, a real trial."""
    env = {k: v for k, v in os.environ.items() if k not in ("REEF_MODEL", "REEF_API_BASE")}
    done = subprocess.run(
        [sys.executable, "-m", "reef_cli", "quickstart"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    chain = scenarios.get("quickstart").chain()
    latest = chain.latest()
    assert latest is not None and latest.number == 2
    meta = latest.meta.model_dump()
    assert meta["source"] == "recipe:reefine" and meta["ask"] == ASK
    assert meta["trial"]["loaded"] is True and meta["trial"]["sandbox"] == "bwrap"
    assert meta["model"].startswith("embedded")
    change = meta["changes"][0]
    files = chain.files(latest)
    assert change["path"] in files and change["path"] not in chain.files(chain.get(1))
    assert "added:" in done.stdout and change["path"] in done.stdout  # the diff was printed

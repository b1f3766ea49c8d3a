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

from recipes import engine, quality
from reef_cli.core import agents, scenarios
from reef_cli.core.budget import BudgetLimits
from reef_cli.core.publishing import publish_files
from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.core.tree import starter_tree
from tests.e2e import agent_rig
from tests.fakes.scripted import FOLLOWED, Scripted, draft_json
from tests.fakes.upstream import Turn

pytestmark = agent_rig.needs("pi", "pi")  # the recipe's default agent
ASK = "when I ask you to fix a bug, reproduce it with a failing test first"
MARKER = "reef-e2e-7c1d"
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("adapter", agent_rig.params())  # every adapter Reef has
def test_reefine_trials_the_chosen_agent_in_the_sandbox(scripted: Scripted, adapter: str) -> None:
    scenario = scenarios.create("demo")
    publish_files("demo", starter_tree().files(), reason="start")
    scripted.push(draft_json())  # the draft; the agent's own request then gets the default answer
    scripted.push_judge(0.9, 0.8)  # the quality gate's judge: the draft, then the answer
    scripted.push_follow(*FOLLOWED)  # the follow check's verdicts: served no, change yes
    outcome = engine.evolve(
        engine.EvolveRequest(
            scenario=scenario,
            ask=ASK,
            adapter=adapter,
            model="openai/scripted",
            api_base=scripted.api_base,
            limits=BudgetLimits(calls=22),
        )
    )
    assert outcome.state == "published", outcome.message
    trial = outcome.evidence["trial"]
    assert trial["agent"] == adapter and trial["agent_version"][0].isdigit()
    assert trial["loaded"] is True and trial["returncode"] == 0
    assert trial["sandbox"] == "bwrap"
    assert "failing test" in trial["answer_excerpt"]
    # the agent's request reached the model with the new rule in it, and was recorded
    agent_requests = [
        e
        for e in scripted.inference()
        if MARKER in json.dumps(e.body) and "response_format" not in e.body
    ]
    assert agent_requests, "the rule text never reached the model"
    records = SQLiteStore().list(session_id=trial["session_id"], limit=None)
    assert {r.id for r in records} == set(trial["receipts"])
    assert all(r.scenario == "demo" for r in records)
    [found] = trial["found"]
    holding = next(r for r in records if r.id == found["receipt"])
    assert MARKER in json.dumps(holding.request)  # the stored request shows the change
    meta = scenarios.get("demo").chain().get(outcome.release).meta.model_dump()
    assert meta["trial"]["receipts"] == trial["receipts"]
    assert meta["agent"]["name"] == adapter
    # the draft, the agent's own call(s), two judgements, the follow check's 12
    assert meta["budget"]["calls"] >= 4 + 12
    assert meta["budget"]["calls"] <= 22
    # the judge saw the agent's real answer, and every check's numbers are in the verdict
    _, answer_judged = scripted.judge_calls()
    assert "I will write a failing test first." in json.dumps(answer_judged.body)
    checks = {c["name"]: c for c in meta["gate"]["checks"]}
    assert checks["answer-follows-ask"]["status"] == "passed"
    assert "score 0.80" in checks["judge-answer"]["detail"]
    assert checks["trial"]["status"] == "passed"
    assert checks["follow"]["status"] == "passed" and meta["follow"]["wins"] == 3


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


WRAPPERS = {agent.name: agent.wrapper for agent in agents.registered()}
# Where each agent puts its rules in a model request (chat messages; Codex: Responses input)
WHERE_RULES_GO = {
    "pi": "messages[0] (system)",
    "claude-code": "messages[0] (user, system-reminder)",
    "codex": "input[2] (user)",
    "opencode": "messages[0] (system, system-reminder)",
}
ROOT_CAUSE = "always explain the root cause first"


@pytest.mark.parametrize("adapter", agent_rig.params())
def test_wrapper_evolve_runs_as_a_serve_job_and_trials_its_own_agent(
    scripted: Scripted, reef_home: Path, adapter: str
) -> None:
    """`reef-claude evolve "…" --yes --wait` trials on Claude Code, `reef-pi` on pi."""
    env = {
        **os.environ,
        "REEF_MODEL": "openai/scripted",
        "REEF_API_BASE": scripted.api_base,
        "REEF_SERVE_PORT": str(_free_port()),
        "REEF_SCENARIO": "team",
    }
    env.pop("REEF_TOKEN", None)
    scenarios.create("team")
    publish_files("team", starter_tree().files(), reason="start")
    scripted.push(
        draft_json(
            body=f"Explain the root cause before any fix ({MARKER}). Name the line that "
            "fails and why, then propose the fix."
        )
    )
    scripted.fake.default = Turn(text="I will explain the root cause first, then the fix.")
    scripted.push_judge(0.9, 0.9)
    scripted.push_follow(*FOLLOWED)
    bin_dir = Path(sys.executable).parent
    try:
        done = subprocess.run(
            [str(bin_dir / WRAPPERS[adapter]), "evolve", ROOT_CAUSE, "--yes", "--wait"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "queued" in done.stdout and "published r2" in done.stdout
        job_id = done.stdout.split("job ")[1].split()[0]
        job = json.loads((reef_home / "jobs" / f"{job_id}.json").read_text())
        assert job["state"] == "published" and job["adapter"] == adapter
        trial = job["outcome"]["evidence"]["trial"]
        assert trial["loaded"] and trial["agent"] == adapter
        meta = scenarios.get("team").chain().get(2).meta.model_dump()
        assert meta["agent"]["name"] == adapter and meta["trial"]["receipts"]
        # the stored request of the agent's own call shows the change it was given
        [found] = meta["trial"]["found"]
        record = SQLiteStore().get(found["receipt"])
        assert MARKER in json.dumps(record.request)
        assert found["in"] == WHERE_RULES_GO[adapter]
    finally:
        subprocess.run(
            [sys.executable, "-c", "from reef_cli.cli import serve_process as s; s.stop()"],
            env=env,
            timeout=30,
        )


@agent_rig.needs("codex", "the Codex CLI")
def test_reef_evolve_adapter_codex_publishes_a_release_whose_trial_names_codex(
    scripted: Scripted, reef_home: Path
) -> None:
    """`reef evolve "…" --adapter codex --yes`, the command a person types: Codex CLI runs
    the trial in the sandbox, speaking the Responses API to the trial's own `reef serve`,
    which translates it to the scripted chat model."""
    scenarios.create("demo")
    publish_files("demo", starter_tree().files(), reason="start")
    scripted.push(draft_json())
    scripted.push_judge(0.9, 0.8)
    scripted.push_follow(*FOLLOWED)
    env = {**os.environ, "REEF_MODEL": "openai/scripted", "REEF_API_BASE": scripted.api_base}
    done = subprocess.run(
        [sys.executable, "-m", "reef_cli", "evolve", ASK, "-s", "demo", "-a", "codex", "-y"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    meta = scenarios.get("demo").chain().get(2).meta.model_dump()
    assert meta["agent"]["name"] == "codex" and meta["agent"]["version"].startswith("0.")
    assert meta["trial"]["agent"] == "codex" and meta["trial"]["sandbox"] == "bwrap"
    assert meta["trial"]["loaded"] is True
    records = SQLiteStore().list(session_id=meta["trial"]["session_id"], limit=None)
    assert records and {r.client_dialect for r in records} == {"responses"}


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
    output = done.stdout + done.stderr
    chain = scenarios.get("quickstart").chain()
    latest = chain.latest()
    if "nothing published: the gate refused" in done.stdout:
        # SmolLM2-135M often drafts junk: the gate must refuse it and publish nothing —
        # and the quickstart ends showing the draft, the reasons and the 1.5B model's
        # command (exit 0: the demo ran), never an error line.
        assert done.returncode == 0, output[-3000:]
        assert "why the gate refused it:" in done.stdout and "│ description:" in done.stdout
        assert "./install.sh --run" in " ".join(done.stdout.split())
        assert "reef: error" not in output
        assert latest is not None and latest.number == 1  # only the starter tree
        return
    assert done.returncode == 0, output[-3000:]
    assert latest is not None and latest.number == 2
    meta = latest.meta.model_dump()
    assert meta["source"] == "recipe:reefine" and meta["ask"] == ASK
    assert meta["trial"]["loaded"] is True and meta["trial"]["sandbox"] == "bwrap"
    assert meta["model"].startswith("embedded")
    change = meta["changes"][0]
    files = chain.files(latest)
    assert change["path"] in files and change["path"] not in chain.files(chain.get(1))
    assert "added:" in done.stdout and change["path"] in done.stdout  # the diff was printed
    # published only because the text a person would keep: every deterministic check
    # passes on what was published, and the gate's verdict shows the judged trial
    written = quality.written_of(
        files, change["kind"], change["name"], change["path"], change["why"]
    )
    failed = [c for c in quality.check_written(ASK, written) if c.status != "passed"]
    assert failed == [], failed
    checks = {c["name"]: c["status"] for c in meta["gate"]["checks"]}
    for name in ("judge-draft", "trial", "answer-follows-ask", "judge-answer", "follow"):
        assert checks[name] == "passed", (name, checks)
    assert "push to the repository" not in files[change["path"]]  # no action the ask lacks


def test_the_wall_time_budget_stops_a_running_agent(scripted: Scripted) -> None:
    scenario = scenarios.create("demo")
    publish_files("demo", starter_tree().files(), reason="start")
    scripted.push(draft_json())
    scripted.push_judge(0.9)  # the draft's judgement
    scripted.fake.push(Turn(stall=120))  # the agent's own call: the model hangs
    outcome = engine.evolve(
        engine.EvolveRequest(
            scenario=scenario,
            ask=ASK,
            model="openai/scripted",
            api_base=scripted.api_base,
            limits=BudgetLimits(seconds=15),
        )
    )
    assert outcome.state == "stopped", outcome.message
    assert "wall-time budget" in outcome.message
    assert outcome.evidence["budget"]["seconds"] < 120  # the agent was stopped, not waited for
    assert [r.number for r in scenario.chain().releases()] == [1]


def test_the_agents_calls_past_the_call_budget_are_refused_before_they_are_made(
    scripted: Scripted,
) -> None:
    scenario = scenarios.create("demo")
    publish_files("demo", starter_tree().files(), reason="start")
    scripted.push(draft_json())  # call 1: the draft
    scripted.push_judge(0.9)  # call 2: its judgement; the agent's call would be the third
    outcome = engine.evolve(
        engine.EvolveRequest(
            scenario=scenario,
            ask=ASK,
            model="openai/scripted",
            api_base=scripted.api_base,
            limits=BudgetLimits(calls=2),
        )
    )
    assert outcome.state == "stopped" and "model-call budget" in outcome.message
    assert len(scripted.inference()) == 2  # the agent's request never reached the model
    assert len(scripted.judge_calls()) == 1
    assert [r.number for r in scenario.chain().releases()] == [1]

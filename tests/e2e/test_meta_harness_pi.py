"""Meta-Harness end to end (issue 28's acceptance): the real pi binary is the proposer,
in the real sandbox, through the job's real recording gateway, driven by a scripted
model; the real engine scores, gates and publishes.

The scripted model answers a sum with the bare number (full marks) only when the tree
holds the marker rule; pi's calls (they carry tools) get the proposer's script: attempt
1 reads the served candidate's scores and a failed task's trace and writes a useless
rule; attempt 2 tries to write outside its workspace and is stopped; attempt 3 reads
attempt 1's scores and the history and writes the marker rule, which the gate then
publishes on the test split. An instrumented runner looks at the whole workspace before
every attempt: no test task may be in it."""

from __future__ import annotations

import json
import re
import uuid
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from recipes import engine
from recipes.engine.trial import AgentRunner
from recipes.meta_harness.watch import tool_calls, written_paths
from reef_cli.core import scenarios
from reef_cli.core.budget import BudgetLimits
from reef_cli.core.publishing import publish_files
from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.core.tree import starter_tree
from tests.e2e import agent_rig
from tests.fakes.server_thread import ServerThread
from tests.fakes.upstream import FakeUpstream, Turn
from tests.recipes.gepa_model import GOOD, MARK, USELESS, sums

pytestmark = agent_rig.needs("pi", "pi")
RULE = "next/tree/rules/answer-format.md"
ESCAPE = f"../reef-escape-{uuid.uuid4().hex[:8]}.md"


def read(path: str) -> Turn:
    return Turn(text="", tool_calls=[("read", {"path": path})])


def write(path: str, content: str) -> Turn:
    return Turn(text="", tool_calls=[("write", {"path": path, "content": content})])


PROPOSER = [
    # attempt 1
    read("README.md"),
    read("candidates/0/scores.json"),
    read("candidates/0/traces/train-0.md"),
    write(RULE, USELESS + "\n"),
    write("next/NOTES.md", "Asked for careful arithmetic."),
    Turn(text="Wrote a rule."),
    # attempt 2: out of its workspace; its next call (which carries it) is refused
    write(ESCAPE, "escaped\n"),
    # attempt 3
    read("candidates/1/scores.json"),
    read("history.json"),
    write(RULE, GOOD + "\n"),
    write("next/NOTES.md", "Asked for the bare number: the traces show sentences fail."),
    Turn(text="Wrote the rule."),
]


class Model:
    """Tasks by the marker; pi's calls (with tools) by the proposer's script."""

    def __init__(self) -> None:
        self.script = deque(PROPOSER)
        self.fake = FakeUpstream(chooser=self._choose)
        self.server = ServerThread(self.fake.app, timeout_graceful_shutdown=1)

    @property
    def api_base(self) -> str:
        return self.server.url + "/v1"

    def _choose(self, _path: str, body: dict[str, Any]) -> Turn:
        if body.get("tools"):
            return self.script.popleft() if self.script else Turn(text="Done.")
        messages = body.get("messages") or []
        user = str(messages[-1].get("content", ""))
        system = str(messages[0].get("content", "")) if messages[0].get("role") == "system" else ""
        a, b = (int(n) for n in re.findall(r"\d+", user)[:2])
        if MARK in system.lower():
            return Turn(text=str(a + b))
        return Turn(text=f"Let me add {a} and {b}. The sum is {a + b}.")

    def proposer_calls(self) -> list[dict[str, Any]]:
        return [e.body for e in self.fake.log if isinstance(e.body, dict) and e.body.get("tools")]


@pytest.fixture
def model() -> Iterator[Model]:
    scripted = Model()
    with scripted.server:
        yield scripted


def test_pi_proposes_from_the_workspace_and_the_gate_publishes(
    model: Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = scenarios.create("demo")
    publish_files("demo", starter_tree().files(), reason="start")
    tasks = sums(train=3, val=3, test=6)
    test_texts = [t.prompt for t in tasks.split("test")] + [t.id for t in tasks.split("test")]
    shown: list[dict[str, str]] = []
    real_run_in = AgentRunner.run_in

    def instrumented(self: AgentRunner, workdir: Path, *args: Any, **kwargs: Any) -> Any:
        files = {
            str(p.relative_to(workdir)): p.read_text(errors="replace")
            for p in sorted(workdir.rglob("*"))
            if p.is_file() and ".reef-agent" not in p.parts
        }
        shown.append(files)
        everything = "\n".join(files) + "\n".join(files.values())
        leaked = [t for t in test_texts if re.search(rf"\b{re.escape(t)}\b", everything)]
        assert not leaked, f"test tasks in the workspace: {leaked}"
        return real_run_in(self, workdir, *args, **kwargs)

    monkeypatch.setattr(AgentRunner, "run_in", instrumented)
    outcome = engine.evolve(
        engine.EvolveRequest(
            scenario=scenario,
            recipe="meta-harness",
            adapter="pi",
            model="openai/scripted",
            api_base=model.api_base,
            tasks=tasks,
            recipe_options={"iterations": 3, "proposer_seconds": 120},
            limits=BudgetLimits(calls=200),
        )
    )
    assert outcome.state == "published", (outcome.message, outcome.evidence.get("meta_harness"))
    assert len(shown) == 3  # one workspace per attempt, each looked at

    # what the gate published: attempt 3's rule, judged on the test split
    chain = scenarios.get("demo").chain()
    release = chain.get(outcome.release)
    assert chain.files(release)["rules/answer-format.md"] == GOOD + "\n"
    meta = release.meta.model_dump()
    evidence = meta["meta_harness"]
    assert [a.get("candidate") for a in evidence["attempts"]] == [1, None, 3]
    assert evidence["attempts"][1]["refused"].startswith(
        "stopped: the proposer wrote outside its workspace"
    )
    assert evidence["stopped"] == 1
    assert [c["mean"]["val"] for c in evidence["candidates"]] == [0.0, 0.0, 1.0]
    assert "traces show sentences fail" in evidence["candidates"][2]["notes"]
    checks = {c["name"]: c for c in meta["gate"]["checks"]}
    assert checks["evaluation"]["status"] == "passed"

    # the recorded calls show pi read the earlier scores and traces, and each file's text
    # came back to the model as the read's result
    records = [r for r in SQLiteStore().list(scenario="demo", limit=None) if r.is_turn]
    reads = {
        args["path"]
        for r in records
        for name, args in tool_calls(r.request)
        if name == "read" and isinstance(args, dict)
    }
    assert {
        "candidates/0/scores.json",
        "candidates/0/traces/train-0.md",
        "candidates/1/scores.json",
        "history.json",
    } <= reads
    results = "\n".join(
        str(m.get("content"))
        for r in records
        for m in (r.request or {}).get("messages", [])
        if m.get("role") == "tool"
    )
    assert '"candidate": 0' in results  # candidate 0's scores.json
    assert "## Why it failed" in results  # the trace
    assert json.loads(shown[0]["candidates/0/scores.json"])["mean"]["val"] == 0.0
    # attempt 3 saw attempt 1's candidate and the refused attempt in the history
    assert "candidates/1/scores.json" in shown[2]
    assert "wrote outside its workspace" in shown[2]["history.json"]

    # the escape never reached the host, and the refused call never reached the model
    assert not (Path("/tmp") / Path(ESCAPE).name).exists()
    assert not [b for b in model.proposer_calls() if ESCAPE in written_paths(b)]
    # no test task reached the proposer through its model calls either
    calls = json.dumps(model.proposer_calls())
    assert not any(t.prompt in calls for t in tasks.split("test"))

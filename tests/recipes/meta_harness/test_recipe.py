"""The Meta-Harness loop on the real engine and gate, against the scripted sums model
(tests/recipes/gepa_model.py: a task is answered with the bare number, full marks on
``exact``, only when the tree holds the marker rule). The proposer here is a Python
stand-in that edits the workspace the way an agent would, one script per attempt; the
real pi binary drives it in tests/e2e/test_meta_harness_pi.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from adapters.contract import Transcript
from recipes import engine
from recipes.base import AgentRun, Watch
from recipes.meta_harness.recipe import PROMPT, MetaHarness
from recipes.tasks import DirectRunner, TaskSet
from reef_cli.core import scenarios
from reef_cli.core.errors import OptionInvalid
from reef_cli.core.publishing import publish_files
from reef_cli.core.tree import starter_tree
from tests.recipes.gepa_model import GOOD, USELESS, Sums, running_sums, sums  # noqa: F401

Attempt = Callable[[Path], Any]  # edits the workspace; returns "stopped: …", "timeout" or None


class ScriptedProposer:
    """An ``AgentSession`` whose runs are Python functions, one per attempt; it keeps a
    copy of every file it was shown, so a test can look for what must never be there."""

    def __init__(self, attempts: list[Attempt]) -> None:
        self.agent = {"name": "scripted", "version": "0"}
        self.attempts = attempts
        self.seen: list[dict[str, str]] = []
        self.prompts: list[str] = []
        self.watches: list[Watch | None] = []

    def run_in(
        self,
        workdir: Path,
        files: dict[str, str],
        prompt: str,
        *,
        watch: Watch | None = None,
        timeout: float = 600.0,
    ) -> AgentRun:
        self.prompts.append(prompt)
        self.watches.append(watch)
        self.seen.append(
            {
                str(p.relative_to(workdir)): p.read_text()
                for p in sorted(workdir.rglob("*"))
                if p.is_file()
            }
        )
        said = self.attempts[len(self.seen) - 1](workdir)
        stopped = said if isinstance(said, str) and said != "timeout" else None
        transcript = Transcript(0, "done", "", timed_out=said == "timeout")
        return AgentRun(transcript, [], stopped=stopped)


def write_rule(text: str, name: str = "answer-format") -> Attempt:
    def attempt(root: Path) -> None:
        rule = root / "next" / "tree" / "rules" / f"{name}.md"
        rule.parent.mkdir(parents=True, exist_ok=True)
        rule.write_text(text + "\n")
        (root / "next" / "NOTES.md").write_text(f"Added rules/{name}.md: {text}")

    return attempt


def nothing(root: Path) -> None:
    return None


def demo() -> None:
    scenarios.create("demo")
    publish_files("demo", starter_tree().files(), reason="start")


def evolve(
    model: Sums, proposer: ScriptedProposer, tasks: TaskSet | None = None, **options: Any
) -> engine.Outcome:
    llm = model.client(timeout=20)
    return engine.run(
        scenarios.get("demo"),
        MetaHarness.with_options({"iterations": len(proposer.attempts), **options}),
        model=llm,
        task_runner=DirectRunner(llm),
        agent=proposer,
        tasks=tasks or sums(),
    )


def test_the_best_candidate_on_val_is_gated_on_test_and_published(model: Sums) -> None:
    demo()
    proposer = ScriptedProposer([write_rule(USELESS), write_rule(GOOD), nothing])
    outcome = evolve(model, proposer)
    assert outcome.state == "published", outcome.message
    release = scenarios.get("demo").chain().get(2)
    files = scenarios.get("demo").chain().files(release)
    assert files["rules/answer-format.md"] == GOOD + "\n"
    meta = release.meta.model_dump()
    assert meta["reason"] == "Meta-Harness: candidate 2 of 3, val 0.000 -> 1.000 on 3 val tasks"
    evidence = meta["meta_harness"]
    assert [a.get("refused") for a in evidence["attempts"]] == [
        None,
        None,
        "no change: next/tree/ is still candidate 2's tree",
    ]
    assert [c["mean"]["val"] for c in evidence["candidates"]] == [0.0, 0.0, 1.0]
    assert evidence["candidates"][2]["notes"] == f"Added rules/answer-format.md: {GOOD}"
    checks = {c["name"]: c for c in meta["gate"]["checks"]}
    assert checks["evaluation"]["status"] == "passed"
    assert proposer.prompts == [PROMPT] * 3


def test_the_workspace_holds_what_the_agent_needs_and_never_a_test_task(model: Sums) -> None:
    demo()
    tasks = sums()
    proposer = ScriptedProposer([write_rule(USELESS), write_rule(GOOD)])
    evolve(model, proposer, tasks)
    first, second = proposer.seen
    assert "README.md" in first and "history.json" in first
    assert "candidates/0/scores.json" in first and "next/NOTES.md" in first
    scores = json.loads(first["candidates/0/scores.json"])
    assert {t["split"] for t in scores["tasks"]} == {"train", "val"}
    # every train/val task failed on the served tree: each has its trace
    traces = sorted(p for p in first if p.startswith("candidates/0/traces/"))
    assert len(traces) == len(tasks.split("train")) + len(tasks.split("val"))
    assert "## Why it failed" in first[traces[0]]
    # the next tree starts as the best candidate so far
    assert {p.removeprefix("next/tree/") for p in first if p.startswith("next/tree/")} == set(
        starter_tree().files()
    )
    # attempt 2 sees attempt 1's candidate, its scores and its notes
    assert "candidates/1/tree/rules/answer-format.md" in second
    assert USELESS in second["candidates/1/NOTES.md"]
    # no test task, by id or by prompt, in any file of any attempt
    for seen in proposer.seen:
        text = "\n".join(seen.values()) + "\n".join(seen)
        for task in tasks.split("test"):
            assert task.prompt not in text and f"{task.id}." not in text


def test_refused_attempts_are_counted_and_never_scored(model: Sums) -> None:
    demo()
    secret = "AKIA" + "ABCDEFGHIJKLMNOP"  # an AWS access key id's shape

    def delete_rules(root: Path) -> None:
        for rule in (root / "next" / "tree" / "rules").glob("*.md"):
            rule.unlink()
        write_rule("Be brief.", "brief")(root)

    proposer = ScriptedProposer(
        [
            lambda root: "the proposer wrote outside its workspace (/etc/passwd)",
            lambda root: "timeout",
            write_rule(f"Use the key {secret} for the API."),
            delete_rules,  # deletes guidance and scores no better: refused
            write_rule(GOOD),
        ]
    )
    outcome = evolve(model, proposer)
    assert outcome.state == "published", outcome.message
    attempts = outcome.evidence["meta_harness"]["attempts"]
    refused = [a.get("refused", "") for a in attempts]
    assert refused[0] == "stopped: the proposer wrote outside its workspace (/etc/passwd)"
    assert refused[1] == "stopped: ran past its 600 s"
    assert refused[2].startswith("refused by the static checks: credential-scan")
    assert secret not in json.dumps(outcome.evidence)
    assert refused[3].startswith("deleted guidance (rules/")
    assert refused[4] == ""
    assert outcome.evidence["meta_harness"]["stopped"] == 2
    # only the served tree, the deleting candidate and the good one were scored: 3 x 7
    task_calls = [b for b in model.requests() if "What is" in b["messages"][-1]["content"]]
    assert len(task_calls) == 3 * 7 + 2 * 6  # and the gate's test split, on both trees


def test_no_candidate_better_than_the_served_tree_publishes_nothing(model: Sums) -> None:
    demo()
    outcome = evolve(model, ScriptedProposer([write_rule(USELESS), nothing]))
    assert outcome.state == "rejected" and outcome.message == "the recipe proposed no change"
    found = outcome.evidence["meta_harness"]
    assert found["best_candidate"] == 0 and "nothing to propose" in found["result"]
    assert [r.number for r in scenarios.get("demo").chain().releases()] == [1]


def test_the_proposer_is_watched_for_writes_outside_its_workspace(model: Sums) -> None:
    demo()
    proposer = ScriptedProposer([nothing])
    evolve(model, proposer)
    watch = proposer.watches[0]
    assert watch is not None
    inside = {"messages": [{"role": "assistant", "tool_calls": [_write("next/tree/rules/a.md")]}]}
    outside = {"messages": [{"role": "assistant", "tool_calls": [_write("../escape.md")]}]}
    assert watch(inside) is None
    assert "outside its workspace (../escape.md)" in (watch(outside) or "")


def _write(path: str) -> dict[str, Any]:
    arguments = json.dumps({"path": path, "content": "x"})
    return {"type": "function", "function": {"name": "write", "arguments": arguments}}


@pytest.mark.parametrize(
    "options, needle",
    [
        ({"iterations": 0}, "iterations must be a whole number from 1 to 50"),
        ({"iterations": True}, "iterations must be a whole number"),
        ({"proposer_seconds": 5}, "proposer_seconds must be a whole number from 30 to 3600"),
        ({"max_metric_calls": 3}, "meta-harness has no option max_metric_calls"),
    ],
)
def test_bad_options_are_one_line_errors(options: dict[str, Any], needle: str) -> None:
    with pytest.raises(OptionInvalid) as raised:
        MetaHarness.with_options(options)
    assert needle in raised.value.one_line()


def test_the_default_budget_grows_with_the_attempts_and_the_tasks() -> None:
    small = MetaHarness.with_options({"iterations": 1}).limits(sums())
    large = MetaHarness.with_options({"iterations": 5}).limits(sums(train=10, val=10))
    assert small is not None and large is not None
    assert small.calls is not None and large.calls is not None and large.calls > small.calls


def test_a_tree_already_scored_is_named_and_not_scored_again(model: Sums) -> None:
    demo()
    proposer = ScriptedProposer([write_rule(USELESS), write_rule(GOOD), write_rule(USELESS)])
    outcome = evolve(model, proposer)
    assert outcome.state == "published", outcome.message
    attempts = outcome.evidence["meta_harness"]["attempts"]
    assert attempts[2]["refused"] == "no change: the tree is candidate 1's, already scored"

"""Reefine with a task set: its budget is sized from the tasks (as GEPA's is), and a call
budget too small for the gate's evaluation is refused before any model call.

The model is the scripted one on a real port: the draft, the judge's scores and every
task answer (the direct runner: one call per task run) go through it."""

from __future__ import annotations

from typing import Any

from recipes import engine
from recipes.reefine.recipe import FOLLOW_CALLS
from recipes.tasks import DirectRunner, Task, TaskSet
from reef_cli.core import scenarios
from reef_cli.core.budget import DEFAULT_LIMITS, BudgetLimits, resolve_limits
from reef_cli.core.llm import ModelClient
from reef_cli.core.publishing import publish_files
from reef_cli.core.tree import starter_tree
from tests.cli.helpers import runner
from tests.fakes.scripted import FOLLOWED, Scripted, draft_json
from tests.recipes.engine.test_engine import ASK, StandIn

TEST_TASKS = 8


def eight_tasks() -> TaskSet:
    """The reported shape: 8 test tasks (and a train and val task), 2 repeats, direct."""
    return TaskSet(
        runner="direct",
        tasks=[
            *(
                Task(id=f"t{i}", prompt=f"say x{i}", expect=[f"x{i}"], split="test")
                for i in range(TEST_TASKS)
            ),
            Task(id="tr", prompt="say y", expect=["y"], split="train"),
            Task(id="va", prompt="say z", expect=["z"], split="val"),
        ],
    )


def demo() -> scenarios.Scenario:
    scenarios.create("demo")
    publish_files("demo", starter_tree().files(), reason="start")
    return scenarios.get("demo")


def test_reefine_sizes_its_budget_from_the_tasks_and_finishes_the_evaluation(
    scripted: Scripted,
) -> None:
    tasks = eight_tasks()
    recipe = engine.recipe_named("reefine")
    bare = recipe.limits(None)  # no tasks: the defaults and the follow check's calls
    assert bare is not None and bare.calls == (DEFAULT_LIMITS.calls or 0) + FOLLOW_CALLS
    limits = resolve_limits(None, recipe.limits(tasks))
    runs = TEST_TASKS * tasks.repeats * 2  # both trees
    assert limits.calls is not None and limits.calls >= (DEFAULT_LIMITS.calls or 0) + runs
    scenario = demo()
    model = ModelClient(
        "openai/scripted", api_base=scripted.api_base, budget=limits.budget(), retries=0
    )
    scripted.push(draft_json())
    scripted.push_judge(0.9, 0.9)  # the draft's judge and the trial answer's
    scripted.push_follow(*FOLLOWED)
    outcome = engine.run(
        scenario,
        recipe,
        model=model,
        ask=ASK,
        runner=StandIn(),
        task_runner=DirectRunner(model),
        tasks=tasks,
    )
    # every answer is the same on both trees: a tie, judged to the end, never stopped
    assert outcome.state == "rejected", outcome.message
    assert "no significant improvement" in outcome.message
    assert outcome.evidence["evaluation"]["numbers"]["tasks"] == TEST_TASKS
    used = outcome.evidence["budget"]["calls"]
    # draft, two judges, the follow check (3 prompts x 2 answers, 2 verdicts), every run
    assert used == 3 + 12 + runs == len(scripted.inference())
    assert used <= limits.calls


def test_a_call_budget_too_small_for_the_evaluation_is_refused_before_any_call(
    scripted: Scripted,
) -> None:
    scenario = demo()
    outcome = engine.evolve(
        engine.EvolveRequest(
            scenario=scenario,
            ask=ASK,
            tasks=eight_tasks(),
            limits=BudgetLimits(calls=20),
            model="openai/scripted",
            api_base=scripted.api_base,
        )
    )
    assert outcome.state == "rejected"
    assert "cannot cover the evaluation" in outcome.message and "32 calls" in outcome.message
    assert "--max-calls" in outcome.message and "at least" in outcome.message
    assert scripted.inference() == []  # refused up front: nothing spent
    assert [r.number for r in scenario.chain().releases()] == [1]


def test_the_cli_names_max_calls_in_one_line(scripted: Scripted, tmp_path: Any) -> None:
    from reef_cli.cli.main import app

    demo()
    path = tmp_path / "tasks.yaml"
    path.write_text(eight_tasks().model_dump_json(exclude_none=True), encoding="utf-8")
    result = runner.invoke(
        app,
        [
            "evolve",
            ASK,
            "-s",
            "demo",
            "--yes",
            "--tasks",
            str(path),
            "--max-calls",
            "20",
            "--model",
            "openai/scripted",
        ],
        env={"REEF_API_BASE": scripted.api_base},
    )
    assert result.exit_code == 3, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[-1].startswith("reef: error: evolve rejected: a budget of 20 model calls")
    assert "fix: raise --max-calls" in lines[-1] and "Traceback" not in result.output
    assert scripted.inference() == []

"""The engine with a task set: a recipe sees train and val only, the gate judges on the
held-out test split, and a gain in format that loses substance is vetoed.

The task model is a real OpenAI-compatible server that answers by request content: a bare
number when the system prompt holds the marker rule, else a worked, verbose answer."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from recipes import engine
from recipes.base import Candidate, Change, Context
from recipes.tasks import DirectRunner, Task, TaskRun, TaskSet
from reef_cli.core import scenarios
from reef_cli.core.budget import Budget
from reef_cli.core.errors import ReefError
from reef_cli.core.llm import ModelClient
from reef_cli.core.publishing import publish_files
from reef_cli.core.tree import starter_tree
from tests.fakes.server_thread import ServerThread
from tests.fakes.upstream import FakeUpstream, Turn

MARKER = "Answer with only the number."


def answer_for(body: dict[str, Any], wrong: bool) -> Turn:
    messages = body["messages"]
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    a, b = (int(x) for x in re.findall(r"\d+", messages[-1]["content"])[:2])
    if MARKER in system:
        return Turn(text=str(a + b + (1 if wrong else 0)))
    return Turn(text=f"First {a}, then add {b}: the total is {a + b}.")


@pytest.fixture
def upstream(request: pytest.FixtureRequest) -> Iterator[FakeUpstream]:
    wrong = getattr(request, "param", False)
    fake = FakeUpstream(chooser=lambda _path, body: answer_for(body, wrong))
    with ServerThread(fake.app, timeout_graceful_shutdown=1) as server:
        fake.api_base = server.url + "/v1"  # type: ignore[attr-defined]
        yield fake


def task_set(scorer: str = "exact", n: int = 8) -> TaskSet:
    def one(split: str, i: int) -> Task:
        a, b = 10 + i, 3 * i + 1
        spec: dict[str, Any] = (
            {"exact": str(a + b)} if scorer == "exact" else {"regex": r"^\s*-?\d+\s*$"}
        )
        return Task(
            id=f"{split}-{i}",
            prompt=f"{a} + {b} =",
            split=split,
            lenient={"last_number": str(a + b)},
            **spec,
        )

    return TaskSet(
        repeats=1,
        runner="direct",
        tasks=[one(s, i) for s in ("train", "val", "test") for i in range(n)],
    )


class MarkerRecipe:
    """Adds the marker rule after looking at the search splits; records what it saw."""

    name = "marker"
    trials = False
    requires_tasks = True

    def __init__(self, peek_at_test: bool = False) -> None:
        self.peek_at_test = peek_at_test
        self.saw: list[str] = []

    def limits(self, tasks: TaskSet | None) -> None:
        return None

    def propose(self, ctx: Context) -> list[Candidate]:
        assert ctx.tasks is not None and ctx.run_task is not None
        self.saw = sorted({t.split for t in ctx.tasks.tasks})
        ctx.notes["searched"] = len(ctx.tasks.tasks)
        ctx.run_task(ctx.incumbent, ctx.tasks.tasks[0])
        if self.peek_at_test:
            ctx.run_task(ctx.incumbent, Task(id="sneak", prompt="1 + 1 =", exact="2"))
        files = {**ctx.incumbent, "rules/terse.md": MARKER + "\n"}
        change = Change("rule", "terse", "rules/terse.md", "found by search", "answer tersely")
        return [Candidate(files, "marker: val 0.0 -> 1.0", [change])]

    def revise(self, ctx: Context, candidate: Candidate, reasons: list[str]) -> list[Candidate]:
        return []

    def settle(self, ctx: Context, state: str) -> None:
        self.settled = state


class Counting(DirectRunner):
    def __init__(self, model: ModelClient) -> None:
        super().__init__(model)
        self.ran: list[str] = []

    def run_task(self, files: dict[str, str], task: Task) -> TaskRun:
        self.ran.append(task.split)
        return super().run_task(files, task)


@pytest.fixture
def scenario() -> scenarios.Scenario:
    scenarios.create("demo")
    publish_files("demo", starter_tree().files(), reason="start")
    return scenarios.get("demo")


def go(
    scenario: scenarios.Scenario, upstream: FakeUpstream, recipe: Any, tasks: TaskSet | None
) -> tuple[engine.Outcome, Counting]:
    model = ModelClient(
        "openai/scripted",
        api_base=upstream.api_base,
        budget=Budget(),
        retries=0,  # type: ignore[attr-defined]
    )
    runner = Counting(model)
    return engine.run(scenario, recipe, model=model, task_runner=runner, tasks=tasks), runner


def test_the_recipe_sees_train_and_val_and_the_gate_judges_on_test(
    scenario: scenarios.Scenario, upstream: FakeUpstream
) -> None:
    recipe = MarkerRecipe()
    outcome, runner = go(scenario, upstream, recipe, task_set())
    assert recipe.saw == ["train", "val"]
    assert outcome.state == "published", outcome.message
    assert runner.ran[0] == "train" and set(runner.ran[1:]) == {"test"}  # search, then gate
    evaluation = scenarios.get("demo").chain().get(2).meta.model_dump()["evaluation"]
    numbers = evaluation["numbers"]
    assert evaluation["split"] == "test" and numbers["tasks"] == 8
    assert (numbers["candidate_mean"], numbers["incumbent_mean"]) == (1.0, 0.0)
    assert numbers["lenient"]["mean_diff"] == 0.0  # right answers both ways
    assert numbers["diff_ci95"] == [1.0, 1.0] and numbers["p"] < 0.01
    assert outcome.evidence["searched"] == 16


@pytest.mark.parametrize("upstream", [True], indirect=True)
def test_a_format_gain_that_loses_the_answer_is_vetoed_with_both_numbers(
    scenario: scenarios.Scenario, upstream: FakeUpstream
) -> None:
    outcome, _ = go(scenario, upstream, MarkerRecipe(), task_set(scorer="format"))
    assert outcome.state == "rejected"
    assert "lenient measure regressed: 1.000 -> 0.000" in outcome.message
    assert "scorer went 0.000 -> 1.000" in outcome.message
    check = next(c for c in outcome.verdict["checks"] if c["name"] == "evaluation")
    assert check["status"] == "failed"
    assert "lenient_mean_diff=-1.0" in check["findings"]
    assert [r.number for r in scenario.chain().releases()] == [1]


def test_a_recipe_asking_for_a_test_task_is_refused(
    scenario: scenarios.Scenario, upstream: FakeUpstream
) -> None:
    outcome, runner = go(scenario, upstream, MarkerRecipe(peek_at_test=True), task_set())
    assert outcome.state == "failed" and "test split is held out" in outcome.message
    assert "test" not in runner.ran
    assert [r.number for r in scenario.chain().releases()] == [1]


@pytest.mark.parametrize(
    ("tasks", "message"),
    [
        (None, "searches against scored tasks and has none"),
        (TaskSet(tasks=[Task(id="a", prompt="1 + 1 =", exact="2")]), "no train or val tasks"),
    ],
)
def test_a_search_recipe_without_usable_tasks_is_rejected_before_any_call(
    scenario: scenarios.Scenario, upstream: FakeUpstream, tasks: TaskSet | None, message: str
) -> None:
    outcome, runner = go(scenario, upstream, MarkerRecipe(), tasks)
    assert outcome.state == "rejected" and message in outcome.message
    assert "reef tasks make" in outcome.message
    assert runner.ran == [] and upstream.log == []


class AskRecipe(MarkerRecipe):
    """A recipe that takes a task set when given one (as Reefine with --tasks)."""

    requires_tasks = False


@pytest.mark.parametrize("recipe", [MarkerRecipe, AskRecipe], ids=["search", "ask"])
def test_a_test_split_too_small_for_the_sign_test_is_refused_before_any_call(
    scenario: scenarios.Scenario, upstream: FakeUpstream, recipe: type[MarkerRecipe]
) -> None:
    """4 test tasks: 4 wins and no loss give p = 1/16 > 0.05, so no candidate could ever
    publish; the job used to spend its budget to learn that."""
    small = task_set(n=4)
    outcome, runner = go(scenario, upstream, recipe(), small)
    assert outcome.state == "rejected"
    assert "4 test task(s)" in outcome.message and "at least 5" in outcome.message
    assert "method: bootstrap" in outcome.message
    assert runner.ran == [] and upstream.log == []
    # the same size decides under the bootstrap, and 5 tasks can pass the sign test
    engine.check_decidable(small.model_copy(update={"method": "bootstrap"}))
    engine.check_decidable(task_set(n=5))


def test_search_only_refuses_test_tasks() -> None:
    guarded = engine.search_only(lambda files, task: TaskRun(1.0, "", ""))
    assert guarded({}, Task(id="a", prompt="p", exact="1", split="val")).score == 1.0
    with pytest.raises(ReefError, match="held out"):
        guarded({}, Task(id="b", prompt="p", exact="1"))

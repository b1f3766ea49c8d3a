"""Under greedy decoding (a ``direct`` task set, one repeat) a tree's run on a task is
made once: a second evaluation of the same candidate makes no model call, and a search
reports how many calls the reuse saved. Runs that may differ (repeats > 1, an agent)
are never reused, and neither is a run with no score."""

from __future__ import annotations

from recipes import engine
from recipes.gepa.components import Layout
from recipes.gepa.search import Meter, ReefAdapter, is_greedy
from recipes.tasks import DirectRunner, Task, TaskRun
from reef_cli.core import scenarios
from reef_cli.core.publishing import publish_files
from reef_cli.core.tree import starter_tree
from tests.recipes.gepa_model import (
    GOOD,
    Sums,
    running_sums,  # noqa: F401  (the `model` fixture)
    sums,
)


def adapter_on(model: Sums, *, greedy: bool) -> ReefAdapter:
    runner = DirectRunner(model.client())
    layout = Layout.of(starter_tree().files())
    return ReefAdapter(layout, runner.run_task, Meter(100, 1), lambda _used: None, greedy=greedy)


def test_the_second_evaluation_of_the_same_candidate_makes_no_model_call(model: Sums) -> None:
    adapter = adapter_on(model, greedy=True)
    batch = sums().split("val")
    first = adapter.evaluate(batch, adapter.layout.seed, capture_traces=True)
    calls = len(model.requests())
    assert calls == len(batch) == first.num_metric_calls
    second = adapter.evaluate(batch, dict(adapter.layout.seed), capture_traces=True)
    assert len(model.requests()) == calls  # no model call
    assert second.num_metric_calls == 0 and adapter.meter.saved == len(batch)
    assert (second.scores, second.outputs) == (first.scores, first.outputs)
    assert second.trajectories == first.trajectories  # reflection reads the same records
    assert adapter.meter.used == len(batch)  # only made runs count against the limit
    # another candidate is another tree: its runs are made
    other = {**adapter.layout.seed, "rules/working-style.md": GOOD}
    adapter.evaluate(batch, other)
    assert len(model.requests()) == calls + len(batch)


def test_runs_that_may_differ_are_made_every_time(model: Sums) -> None:
    adapter = adapter_on(model, greedy=False)
    batch = sums().split("val")
    adapter.evaluate(batch, adapter.layout.seed)
    adapter.evaluate(batch, adapter.layout.seed)
    assert len(model.requests()) == 2 * len(batch) and adapter.meter.saved == 0
    assert is_greedy(sums()) and not is_greedy(sums(repeats=2))
    assert not is_greedy(sums(runner="pi"))


def test_a_run_with_no_score_is_not_reused() -> None:
    made: list[str] = []

    def run_task(files: dict[str, str], task: Task) -> TaskRun:
        made.append(task.id)
        return TaskRun(None if len(made) == 1 else 1.0, "13", "model outage")

    layout = Layout.of(starter_tree().files())
    adapter = ReefAdapter(layout, run_task, Meter(100, 1), lambda _used: None, greedy=True)
    [task] = sums().split("val")[:1]
    adapter.evaluate([task], layout.seed)
    adapter.evaluate([task], layout.seed)  # the outage is tried again
    adapter.evaluate([task], layout.seed)  # the score is reused
    assert made == [task.id, task.id] and adapter.meter.saved == 1


def run_search(model: Sums, scenario: str, repeats: int) -> engine.Outcome:
    scenarios.create(scenario)
    publish_files(scenario, starter_tree().files(), reason="start")
    llm = model.client()
    return engine.run(
        scenarios.get(scenario),
        engine.recipe_named("gepa", {"max_metric_calls": 40}),
        model=llm,
        task_runner=DirectRunner(llm),
        tasks=sums(repeats=repeats),
    )


def test_a_search_reports_the_calls_the_reuse_saved(model: Sums) -> None:
    """The same search, greedy and not: the served tree's minibatch runs recur on each
    step that picks it as the parent; reused, they cost nothing and the search gets more
    steps from the same 40 metric calls."""
    greedy = run_search(model, "greedy", repeats=1)
    notes = greedy.evidence["gepa"]
    assert greedy.state == "rejected" and notes["greedy"] is True
    assert notes["calls_saved"] > 0
    assert notes["metric_calls"] <= 40
    made = [b for b in model.requests() if b not in model.reflections()]
    assert len(made) == notes["metric_calls"]  # every run made was metered, none reused
    before = len(model.requests())
    plain = run_search(model, "plain", repeats=2)
    other = plain.evidence["gepa"]
    assert other["greedy"] is False and other["calls_saved"] == 0
    assert other["metric_calls"] <= 40
    # the reuse bought steps: more reflections from the same metric-call limit
    assert notes["reflection_calls"] > other["reflection_calls"]
    assert len(model.requests()) - before == other["metric_calls"] + other["reflection_calls"]

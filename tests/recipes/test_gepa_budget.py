"""GEPA's default metric-call budget: 15 x the val split where that fits the job's time
limit, else the most that fits (and the notes say so); a given max_metric_calls is used
as given."""

from __future__ import annotations

from recipes import engine
from recipes.gepa.budget import (
    SECONDS_PER_CALL,
    VAL_FACTOR,
    max_steps,
    metric_budget,
    needed_calls,
)
from recipes.gepa.recipe import Gepa
from recipes.tasks import DirectRunner
from reef_cli.core import scenarios
from reef_cli.core.budget import Budget
from reef_cli.core.publishing import publish_files
from reef_cli.core.tree import starter_tree
from tests.recipes.gepa_model import (
    Sums,
    running_sums,  # noqa: F401  (the `model` fixture)
    sums,
)


def test_the_default_is_fifteen_times_the_val_split_when_it_fits() -> None:
    free = metric_budget(None, 20, 3, seconds_left=None)
    assert free.calls == VAL_FACTOR * 20 == 300 and "no time limit" in free.rule
    # 300 calls, their 101 reflections and the gate's 40 runs: 442 calls of time
    roomy = metric_budget(None, 20, 3, seconds_left=442 * SECONDS_PER_CALL, held_out_runs=40)
    assert roomy.calls == 300 and "fits the time limit" in roomy.rule
    # a tiny val split still gets one whole step
    assert metric_budget(None, 1, 10, seconds_left=None).calls == needed_calls(1, 10) == 22


def test_when_fifteen_times_does_not_fit_the_most_that_fits_is_used_and_said() -> None:
    seconds = 200 * SECONDS_PER_CALL
    cut = metric_budget(None, 20, 3, seconds_left=seconds, held_out_runs=40)
    # (200 - 40 - 1) calls of time, 3 of every 4 for task runs, 1 for the reflection
    assert cut.calls == (200 - 40 - 1) * 3 // 4 == 119
    assert cut.calls + max_steps(cut.calls, 3) + 40 <= 200  # it does fit
    assert "15 x 20 val tasks = 300 does not fit the time limit" in cut.rule
    assert "the most that fits" in cut.rule
    # too little time even for one step: the least a search can use, said so
    least = metric_budget(None, 20, 3, seconds_left=60.0)
    assert least.calls == needed_calls(20, 3) and "the least a search can use" in least.rule
    given = metric_budget(77, 20, 3, seconds_left=1.0)
    assert given.calls == 77 and given.rule == "max_metric_calls 77, as given"


def test_the_recipes_own_limits_pay_for_the_default() -> None:
    tasks = sums(val=20, test=10)
    limits = Gepa().limits(tasks)
    assert limits is not None and limits.calls is not None and limits.seconds is not None
    runs, steps = VAL_FACTOR * 20, max_steps(VAL_FACTOR * 20, 3)
    assert limits.calls >= runs + steps + 10 * 2
    assert limits.seconds >= (runs + steps + 10 * 2) * SECONDS_PER_CALL  # so it fits
    assert Gepa.with_options({}).options.max_metric_calls is None
    assert Gepa.with_options({"max_metric_calls": 9}).options.max_metric_calls == 9


def search(model: Sums, scenario: str, seconds: float | None) -> dict[str, object]:
    scenarios.create(scenario)
    publish_files(scenario, starter_tree().files(), reason="start")
    llm = model.client(Budget(max_seconds=seconds))
    outcome = engine.run(
        scenarios.get(scenario),
        engine.recipe_named("gepa", {}),
        model=llm,
        task_runner=DirectRunner(llm),
        tasks=sums(),
    )
    assert outcome.state == "rejected", outcome.message  # USELESS never helps
    notes: dict[str, object] = outcome.evidence["gepa"]
    return notes


def test_a_job_without_the_option_spends_fifteen_times_val_or_what_its_time_fits(
    model: Sums,
) -> None:
    roomy = search(model, "roomy", None)
    assert roomy["max_metric_calls"] == VAL_FACTOR * 3 == 45
    assert "15 x 3 val tasks" in str(roomy["max_metric_calls_rule"])
    assert 0 < int(str(roomy["metric_calls"])) <= 45
    # 600 s at ~15 s a call: 40 calls of time, 12 kept for the gate's 6 test tasks x 2
    tight = search(model, "tight", 600.0)
    assert tight["max_metric_calls"] == (40 - 12 - 1) * 3 // 4 == 20
    assert "45 does not fit the time limit" in str(tight["max_metric_calls_rule"])
    assert int(str(tight["metric_calls"])) <= 20

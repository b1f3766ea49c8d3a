"""`reef eval`'s work: score releases on a task set's held-out split, with intervals.

Each named release runs every test task ``repeats`` times through the same ``run_side``
the gate uses. Per release: the mean over tasks (a task's score is the mean of its
repeats) with a 95% bootstrap interval, how many tasks and runs, how many runs had no
score (an outage) and the lenient measure where tasks name one. Every release after the
first is then compared with the first by ``core.paired_rule.decide`` — the gate's own rule
on the same paired scores, policy and seed — so a number here is the number the gate
would have printed. A release may be named twice (``1,1``): each entry runs on its own,
so the comparison is an A/A test of the evaluator's noise.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from recipes import engine
from recipes.base import Progress, no_progress
from recipes.tasks import RunTask, Task, TaskRunner, TaskSet
from recipes.tasks.evaluation import Scores, run_side
from recipes.tasks.runners import parallelism
from reef_cli.core import config
from reef_cli.core.budget import BudgetLimits
from reef_cli.core.errors import ReleaseNotFound, TaskSetError
from reef_cli.core.llm import ModelClient
from reef_cli.core.paired_rule import decide, interval
from reef_cli.core.scenarios import Scenario

SPLIT = "test"


@dataclass
class ReleaseScore:
    """One entry of the report: a release's scores, and its comparison with the first."""

    number: int
    tasks: int  # tasks with at least one valid score
    runs: int
    invalid: int  # runs that gave no score (the model or the evaluator failed)
    mean: float | None
    ci95: list[float] | None
    per_task: dict[str, float] = field(default_factory=dict)
    lenient: dict[str, Any] | None = None  # {tasks, mean, ci95} where tasks name one
    comparison: dict[str, Any] | None = None  # decide() vs the first entry; None for it

    def to_json(self) -> dict[str, Any]:
        return {
            "release": self.number,
            "tag": f"r{self.number}",
            "tasks": self.tasks,
            "runs": self.runs,
            "invalid": self.invalid,
            "mean": self.mean,
            "ci95": self.ci95,
            "per_task": self.per_task,
            "lenient": self.lenient,
            # against the first entry (None for it): decide()'s numbers, then its verdict
            "vs_first": self.comparison["numbers"] if self.comparison else None,
            "verdict": (
                {k: self.comparison[k] for k in ("against", "status", "reason")}
                if self.comparison
                else None
            ),
        }


@dataclass
class EvalReport:
    scenario: str
    task_set: str | None
    repeats: int
    method: str
    seed: int
    releases: list[ReleaseScore]
    about: dict[str, Any] = field(default_factory=dict)  # runner, model: the evidence

    @property
    def baseline(self) -> int:
        return self.releases[0].number

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "task_set": self.task_set,
            "split": SPLIT,
            "repeats": self.repeats,
            "method": self.method,
            "seed": self.seed,
            "baseline": self.baseline,
            "releases": [r.to_json() for r in self.releases],
            **({"about": self.about} if self.about else {}),
        }


def parse_releases(scenario: Scenario, specs: str) -> list[int]:
    """``1,latest`` / ``r2`` / ``3`` -> release numbers, by the chain's own spec rules
    (``Scenario.resolve``: numbers, tags, latest, previous, served, installed)."""
    named = [part.strip() for part in specs.split(",") if part.strip()]
    if not named:
        raise ReleaseNotFound(
            "no release named", "pass --releases with one or more releases, e.g. 1,latest"
        )
    return [scenario.resolve(spec).number for spec in named]


def held_out(tasks: TaskSet) -> TaskSet:
    """The test split: what the gate judges on, so what releases are compared on."""
    test = tasks.only("test")
    if test is None:
        counts = ", ".join(f"{k} {v}" for k, v in tasks.counts().items())
        raise TaskSetError(
            f"the task set has no test tasks ({counts}); reef eval scores the held-out split",
            "mark some tasks `split: test` (the default when a task names no split)",
        )
    return test


def clients(
    model: str | None,
    api_base: str | None = None,
    limits: BudgetLimits | None = None,
    cache: bool = True,
) -> tuple[ModelClient, ModelClient]:
    """(model, judge) the way ``engine.evolve`` builds them: the configured judge model or
    the model itself, sharing one budget (unlimited unless ``limits``: an evaluation's size
    is fixed by the task set, releases x tasks x repeats)."""
    settings = config.load_settings()
    budget = (limits or BudgetLimits()).budget()
    client = ModelClient(model, api_base=api_base, budget=budget, cache=cache)
    return client, engine.judge_client(settings, client)


def _summary(
    values: Scores, seed: int
) -> tuple[dict[str, float], float | None, list[float] | None]:
    """(per-task means over valid repeats, mean over tasks, its 95% interval)."""
    means = {
        task: statistics.fmean(v for v in got if v is not None)
        for task, got in values.items()
        if any(v is not None for v in got)
    }
    if not means:
        return {}, None, None
    low, high = interval(list(means.values()), seed=seed)
    return (
        {t: round(m, 4) for t, m in means.items()},
        round(statistics.fmean(means.values()), 4),
        [round(low, 4), round(high, 4)],
    )


def evaluate_releases(
    scenario: Scenario,
    tasks: TaskSet,
    releases: Sequence[int],
    task_runner: TaskRunner,
    *,
    progress: Progress | None = None,
    about: dict[str, Any] | None = None,
) -> EvalReport:
    """Run the test split on each release's tree and compare each with the first.

    ``task_runner`` has ``run_task(files, task) -> TaskRun`` (a ``DirectRunner``, an
    agent runner, or a test's stand-in); ``progress(message, fraction)`` ticks once per
    task run. Budget errors propagate (nothing partial is reported)."""
    if not releases:
        raise ReleaseNotFound("no release named", "pass --releases, e.g. 1,latest")
    test = held_out(tasks)
    policy = test.policy()
    chain = scenario.chain()
    trees = {number: chain.files(chain.get(number)) for number in dict.fromkeys(releases)}
    run_task: RunTask = task_runner.run_task
    tick = progress or no_progress
    total = len(releases) * len(test.tasks) * test.repeats
    done = [0]
    sides: list[tuple[int, Scores, Scores]] = []
    for number in releases:

        def on_run(task: Task, number: int = number) -> None:
            tick(f"r{number}: {task.id} ({done[0] + 1}/{total})", done[0] / total)
            done[0] += 1

        scores, lenient = run_side(
            trees[number], test.tasks, test.repeats, run_task, on_run, parallelism(task_runner)
        )
        sides.append((number, scores, lenient))
    tick(f"{total} run(s) done", 1.0)
    first_number, first, first_lenient = sides[0]
    out: list[ReleaseScore] = []
    for index, (number, scores, lenient) in enumerate(sides):
        runs = [v for got in scores.values() for v in got]
        per_task, mean, ci95 = _summary(scores, policy.seed)
        entry = ReleaseScore(
            number=number,
            tasks=len(per_task),
            runs=len(runs),
            invalid=sum(1 for v in runs if v is None),
            mean=mean,
            ci95=ci95,
            per_task=per_task,
        )
        if lenient:
            lenient_tasks, lenient_mean, lenient_ci = _summary(lenient, policy.seed)
            entry.lenient = {"tasks": len(lenient_tasks), "mean": lenient_mean, "ci95": lenient_ci}
        if index > 0:
            paired = (lenient, first_lenient) if lenient else None
            outcome = decide(scores, first, policy, lenient=paired)
            entry.comparison = {"against": first_number, **outcome.to_json()}
        out.append(entry)
    return EvalReport(
        scenario=scenario.name,
        task_set=tasks.name,
        repeats=test.repeats,
        method=policy.method,
        seed=policy.seed,
        releases=out,
        about=about or {},
    )

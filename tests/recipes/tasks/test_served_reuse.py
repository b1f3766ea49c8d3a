"""A replay task carries the served release's recorded answer and the person's score of
it: the incumbent's side reuses them (no run) only when the incumbent is that release."""

from __future__ import annotations

from collections.abc import Callable

from recipes.tasks import Task, TaskSet, evaluate
from recipes.tasks.model import Scorer, Served
from recipes.tasks.scoring import TaskRun

RULE = {"rules/r.md": "Be plain."}


def tasks(release: int) -> TaskSet:
    return TaskSet(
        repeats=1,
        tasks=[
            Task(
                id=f"t{i}",
                prompt=f"question {i}",
                contains="plain",
                lenient=Scorer(regex=r"\w+\W+\w+\W+\w+"),
                served=Served(release=release, answer="**Bold** reply", score=0.0),
            )
            for i in range(5)
        ],
    )


def runner(calls: list[tuple[bool, str]]) -> Callable[[dict[str, str], Task], TaskRun]:
    def run(files: dict[str, str], task: Task) -> TaskRun:
        calls.append((files == RULE, task.id))
        return TaskRun(1.0, "a plain reply here", "ok", lenient=1.0)

    return run


def test_the_incumbents_side_is_the_persons_score_of_its_recorded_answer() -> None:
    calls: list[tuple[bool, str]] = []
    outcome = evaluate(RULE, {}, tasks(release=3), runner(calls), incumbent_release=3)
    assert calls == [(True, f"t{i}") for i in range(5)]  # the candidate only
    numbers = outcome.numbers
    assert numbers["incumbent_mean"] == 0.0 and numbers["wins"] == 5
    assert numbers["lenient"]["incumbent_mean"] == 0.0  # "**Bold** reply": two words


def test_another_release_or_none_runs_the_incumbent() -> None:
    for release in (2, None):
        calls: list[tuple[bool, str]] = []
        outcome = evaluate(RULE, {}, tasks(release=3), runner(calls), incumbent_release=release)
        assert len(calls) == 10 and outcome.numbers["incumbent_mean"] == 1.0

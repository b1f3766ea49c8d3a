"""The paired evaluation the gate runs: candidate and incumbent on the same tasks.

Each task runs ``repeats`` times on both trees; the scores (and the lenient measure, where
tasks name one) go to ``core.paired_rule.decide``, which returns the verdict and every
number behind it. A run with no score is an outage: the evaluation is ``invalid``.

A task that carries the served release's recorded answer and the person's score of it
(``Task.served``, a replay task) is not run on the incumbent when the incumbent is that
release: the person's own verdict is the incumbent's score — a better measure than a
judge's, and no call. Its lenient measure is the recorded answer's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from recipes.tasks.model import Task, TaskSet
from recipes.tasks.scoring import TaskRun, score
from reef_cli.core.paired_rule import Outcome, decide

RunTask = Callable[[dict[str, str], Task], TaskRun]
Progress = Callable[[str, float | None], None]
Scores = dict[str, list[float | None]]
Side = TypeVar("Side")  # what one side is: a harness tree here, weights in reefd's gate


def run_side(
    files: Side,
    tasks: Sequence[Task],
    repeats: int,
    run_task: Callable[[Side, Task], TaskRun],
    on_run: Callable[[Task], None] | None = None,
    workers: int = 1,
) -> tuple[Scores, Scores]:
    """(scores, lenient scores) of one side (a tree, or whatever ``run_task`` runs):
    task id -> one value per repeat. ``workers`` > 1 runs that many tasks at once (the
    embedded model decodes them together); the results keep the tasks' order."""
    jobs = [task for task in tasks for _ in range(repeats)]

    def one(task: Task) -> TaskRun:
        if on_run is not None:
            on_run(task)
        return run_task(files, task)

    if workers > 1 and len(jobs) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(workers, len(jobs)), thread_name_prefix="reef-task") as pool:
            runs = list(pool.map(one, jobs))
    else:
        runs = [one(task) for task in jobs]
    scores: Scores = {}
    lenient: Scores = {}
    for task, run in zip(jobs, runs, strict=True):
        scores.setdefault(task.id, []).append(run.score)
        if task.lenient is not None:
            lenient.setdefault(task.id, []).append(run.lenient)
    return scores, lenient


def reusing(run_task: RunTask, release: int | None) -> RunTask:
    """``run_task`` for the incumbent: a task the served release ``release`` already
    answered for a person (``Task.served``) is that answer with the person's score."""

    def run(files: dict[str, str], task: Task) -> TaskRun:
        served = task.served
        if served is None or release is None or served.release != release:
            return run_task(files, task)
        lenient = None
        if task.lenient is not None:
            lenient = score(task.lenient, served.answer, task).score
        return TaskRun(served.score, served.answer, "the person's own score", lenient=lenient)

    return run


def evaluate(
    candidate: dict[str, str],
    incumbent: dict[str, str],
    tasks: TaskSet,
    run_task: RunTask,
    progress: Progress | None = None,
    incumbent_release: int | None = None,
    workers: int = 1,
) -> Outcome:
    """Paired evaluation of two trees on ``tasks`` (all of them: pass the held-out split).
    ``incumbent_release``: the served release's number, whose recorded runs are reused."""
    total = len(tasks.tasks) * tasks.repeats * 2
    done = [0]

    def on_run(side: str) -> Callable[[Task], None]:
        def tick(task: Task) -> None:
            if progress is not None:
                progress(f"evaluation: {task.id} ({side})", 0.55 + 0.3 * done[0] / total)
            done[0] += 1

        return tick

    cand, cand_lenient = run_side(
        candidate, tasks.tasks, tasks.repeats, run_task, on_run("candidate"), workers
    )
    inc, inc_lenient = run_side(
        incumbent,
        tasks.tasks,
        tasks.repeats,
        reusing(run_task, incumbent_release),
        on_run("incumbent"),
        workers,
    )
    lenient = (cand_lenient, inc_lenient) if cand_lenient else None
    return decide(cand, inc, tasks.policy(), lenient=lenient)

"""A candidate's scores on the train and val splits, the rule against deleting guidance,
and the choice of the best candidate on val (the frontier the proposer builds on)."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from recipes.base import Context
from recipes.tasks import Task, TaskRun, TaskSet

SPLITS = ("train", "val")
GUIDANCE = ("rules/", "skills/")  # what the agent reads as instructions
SHRUNK = 0.5  # a guidance file cut below half its words counts as deleted


@dataclass
class Scores:
    """Every train and val task's run on one tree."""

    runs: dict[str, TaskRun]  # task id -> run
    splits: dict[str, str]  # task id -> split

    def _of(self, split: str) -> list[TaskRun]:
        return [run for tid, run in self.runs.items() if self.splits[tid] == split]

    def mean(self, split: str) -> float:
        """The split's mean score; an outage (no score) counts as 0: it is never a win."""
        runs = self._of(split)
        return sum(run.score or 0.0 for run in runs) / len(runs) if runs else 0.0

    def lenient(self, split: str) -> float | None:
        values = [run.lenient for run in self._of(split) if run.lenient is not None]
        return sum(values) / len(values) if values else None

    def outages(self) -> int:
        return sum(1 for run in self.runs.values() if run.score is None)

    def failed(self) -> list[str]:
        """Task ids that did not score full marks, in task order."""
        return [tid for tid, run in self.runs.items() if run.score is None or run.score < 1.0]

    def to_json(self) -> dict[str, Any]:
        return {
            "mean": {split: round(self.mean(split), 4) for split in SPLITS},
            "lenient": {
                split: None if (v := self.lenient(split)) is None else round(v, 4)
                for split in SPLITS
            },
            "outages": self.outages(),
            "tasks": [
                {
                    "id": tid,
                    "split": self.splits[tid],
                    "score": run.score,
                    "lenient": run.lenient,
                }
                for tid, run in self.runs.items()
            ],
        }


@dataclass
class Kept:
    """A candidate in the frontier: its tree, where it came from, its scores, its notes."""

    number: int  # 0: the served tree; k: the candidate of iteration k
    files: dict[str, str]
    parent: int | None
    scores: Scores
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def val(self) -> float:
        return self.scores.mean("val")


def score(ctx: Context, files: dict[str, str], tasks: TaskSet) -> Scores:
    """``files`` run on every train and val task, as many at once as the model decodes
    together (``Context.parallelism``)."""
    if ctx.run_task is None:
        raise RuntimeError("meta-harness needs the job's task runner")
    run_task = ctx.run_task
    order: list[Task] = [t for t in tasks.tasks if t.split in SPLITS]

    def one(task: Task) -> TaskRun:
        return run_task(files, task)

    with ThreadPoolExecutor(max_workers=max(1, ctx.parallelism)) as pool:
        runs = list(pool.map(one, order))
    by_id = {t.id: run for t, run in zip(order, runs, strict=True)}
    return Scores(by_id, {t.id: t.split for t in order})


def _words(text: str) -> int:
    return len(text.split())


def deleted_guidance(parent: Mapping[str, str], files: Mapping[str, str]) -> list[str]:
    """Guidance files of ``parent`` that ``files`` removed, or cut below half their words."""
    gone = []
    for path, text in sorted(parent.items()):
        if not path.startswith(GUIDANCE):
            continue
        now = files.get(path)
        if now is None or _words(now) < SHRUNK * _words(text):
            gone.append(path)
    return gone


def best(kept: list[Kept]) -> Kept:
    """The best candidate on val; a tie goes to the higher train score, then the earlier
    candidate (the served tree wins every tie: a change must earn its place)."""
    return max(kept, key=lambda k: (k.val(), k.scores.mean("train"), -k.number))

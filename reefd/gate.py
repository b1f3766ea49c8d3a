"""The weight gate: a paired evaluation of candidate weights against the served ones.

A training step that ran is no evidence that the model got better, so a weight release
passes only the way a harness release does: both sides answer every task of the task
set's held-out ``test`` split ``repeats`` times, ``recipes.tasks.scoring.grade`` scores
the answers, and ``reef_cli.core.evaluation.decide`` gives the verdict (sign test or
bootstrap, protected-task and lenient vetoes) with every number behind it. An answer of
``None`` — or a Reef error while answering — is an outage: the run is ``invalid``, never
a win, and the runs still to come are skipped (their result could not change that).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recipes.tasks.evaluation import Progress, Scores, run_side
from recipes.tasks.model import Split, Task, TaskSet
from recipes.tasks.scoring import TaskRun, grade
from reef_cli.core.errors import ReefError
from reef_cli.core.evaluation import Outcome, decide
from reef_cli.core.llm import ModelClient

Answer = Callable[[Task], str | None]  # None: an outage (engine down, generation failed)
SPLIT: Split = "test"


def evaluate_weights(
    candidate: Answer,
    served: Answer,
    tasks: TaskSet,
    *,
    judge: ModelClient | None = None,
    progress: Progress | None = None,
) -> Outcome:
    """``decide()``'s verdict on candidate vs served answers over the test split."""
    test = tasks.split(SPLIT)
    if not test:
        return Outcome(
            "invalid",
            f"the task set has no {SPLIT} tasks, so the weights cannot be judged",
            {"split": SPLIT, "tasks": 0},
        )
    total = len(test) * tasks.repeats * 2
    done = [0]
    outage: list[str] = []

    def runner(side: str) -> Callable[[Answer, Task], TaskRun]:
        def run(answer: Answer, task: Task) -> TaskRun:
            if progress is not None:
                progress(f"weight gate: {task.id} ({side})", done[0] / total)
            done[0] += 1
            if outage:
                return TaskRun(None, "", "skipped: an earlier run had an outage")
            try:
                text = answer(task)
            except ReefError as exc:
                text = None
                outage.append(f"{side} {task.id}: {exc.message}")
            else:
                if text is None:
                    outage.append(f"{side} {task.id}: no answer")
            return grade(task, text, judge=judge)

        return run

    cand, cand_lenient = run_side(candidate, test, tasks.repeats, runner("candidate"))
    inc, inc_lenient = run_side(served, test, tasks.repeats, runner("served"))
    lenient: tuple[Scores, Scores] | None = (cand_lenient, inc_lenient) if cand_lenient else None
    outcome = decide(cand, inc, tasks.policy(), lenient=lenient)
    outcome.numbers["split"] = SPLIT
    if outage:  # decide() says invalid; name the outage, not the runs skipped after it
        outcome.numbers["outage"] = outage[0]
        outcome.reason = f"an outage makes the evaluation invalid: {outage[0]}"
    if progress is not None:
        progress(f"weight gate: {outcome.status}", 1.0)
    return outcome


def gate_record(outcome: Outcome) -> dict[str, Any]:
    """What a weight release's ``RELEASE.json`` keeps of the gate (``gate``): the verdict,
    why, every number, and the check in the harness gate's shape."""
    return {
        "verdict": outcome.status,
        "reason": outcome.reason,
        "numbers": outcome.numbers,
        "checks": [outcome.as_check().to_json()],
    }

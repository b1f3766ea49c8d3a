"""The weight gate with plain answer functions standing in for the two models: the verdict
is decide()'s on the test split alone, a regression is refused, an outage is invalid.
No torch is needed: the gate judges answers, whatever produced them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recipes.engine.gate import evaluate_weights, gate_record
from recipes.tasks.model import Task, TaskSet
from reef_cli.core.errors import EngineError

RIGHT = {f"t{i}": str(i * 3) for i in range(6)}


def task_set(*, protected: str | None = None, repeats: int = 2) -> TaskSet:
    tasks: list[dict[str, Any]] = [
        {"id": tid, "prompt": f"{tid}: what is {int(ans) // 3} times 3?", "exact": ans}
        for tid, ans in RIGHT.items()
    ]
    for task in tasks:
        task["protected"] = task["id"] == protected
    tasks += [
        {"id": "train-1", "prompt": "train: 1+1", "exact": "2", "split": "train"},
        {"id": "val-1", "prompt": "val: 2+2", "exact": "4", "split": "val"},
    ]
    return TaskSet.model_validate({"repeats": repeats, "tasks": tasks})


class Model:
    """Answers right on the tasks it knows, wrong elsewhere; logs what it was asked."""

    def __init__(self, knows: set[str], *, down_on: str | None = None) -> None:
        self.knows = knows
        self.down_on = down_on
        self.asked: list[str] = []

    def __call__(self, task: Task) -> str | None:
        self.asked.append(task.id)
        if task.id == self.down_on:
            return None
        return RIGHT.get(task.id, "?") if task.id in self.knows else "no idea"


def test_a_better_candidate_passes() -> None:
    candidate, served = Model(set(RIGHT)), Model(set())
    outcome = evaluate_weights(candidate, served, task_set())
    assert outcome.status == "passed", outcome.reason
    numbers = outcome.numbers
    assert numbers["tasks"] == 6 and numbers["repeats"] == 2
    assert numbers["candidate_mean"] == 1.0 and numbers["incumbent_mean"] == 0.0
    assert (numbers["wins"], numbers["losses"]) == (6, 0)
    assert numbers["split"] == "test"
    for key in ("candidate_ci95", "incumbent_ci95", "diff_ci95"):
        low, high = numbers[key]
        assert low <= high
    record = gate_record(outcome)
    assert record["verdict"] == "passed"
    assert record["reason"] == outcome.reason
    assert record["numbers"]["diff_ci95"] == numbers["diff_ci95"]
    assert record["checks"][0]["name"] == "evaluation"
    assert record["checks"][0]["status"] == "passed"


def test_a_regressing_candidate_is_rejected() -> None:
    candidate, served = Model({"t0", "t1"}), Model(set(RIGHT))
    outcome = evaluate_weights(candidate, served, task_set())
    assert outcome.status == "failed"
    assert "no significant improvement" in outcome.reason
    assert "0 wins / 4 losses" in outcome.reason
    assert outcome.numbers["mean_diff"] < 0
    assert gate_record(outcome)["verdict"] == "failed"


def test_a_protected_task_regression_vetoes_a_winner() -> None:
    candidate = Model(set(RIGHT) - {"t5"})
    outcome = evaluate_weights(candidate, Model({"t5"}), task_set(protected="t5"))
    assert outcome.status == "failed"
    assert "protected task(s) regressed: t5" in outcome.reason


def test_a_tie_is_no_pass() -> None:
    outcome = evaluate_weights(Model(set(RIGHT)), Model(set(RIGHT)), task_set())
    assert outcome.status == "failed"


def test_an_outage_is_invalid_and_stops_the_runs() -> None:
    candidate = Model(set(RIGHT), down_on="t1")
    served = Model(set())
    outcome = evaluate_weights(candidate, served, task_set())
    assert outcome.status == "invalid"
    assert "outage" in outcome.reason and "t1" in outcome.reason
    assert outcome.numbers["outage"] == "candidate t1: no answer"
    assert candidate.asked == ["t0", "t0", "t1"]  # the rest could not change the verdict
    assert served.asked == []
    assert gate_record(outcome)["verdict"] == "invalid"


def test_an_engine_error_is_an_outage() -> None:
    def failing(task: Task) -> str | None:
        raise EngineError("engine http://127.0.0.1:1 is unreachable", "start it")

    outcome = evaluate_weights(Model(set(RIGHT)), failing, task_set())
    assert outcome.status == "invalid"
    assert "unreachable" in outcome.reason


def test_only_the_test_split_is_used() -> None:
    candidate, served = Model(set(RIGHT)), Model(set())
    progress: list[tuple[str, float | None]] = []
    evaluate_weights(
        candidate, served, task_set(repeats=1), progress=lambda m, f: progress.append((m, f))
    )
    assert candidate.asked == list(RIGHT)
    assert served.asked == list(RIGHT)
    assert progress[0] == ("weight gate: t0 (candidate)", 0.0)
    assert progress[-1] == ("weight gate: passed", 1.0)


def test_no_test_tasks_is_invalid() -> None:
    only_train = TaskSet.model_validate(
        {"tasks": [{"id": "a", "prompt": "p", "exact": "x", "split": "train"}]}
    )
    never: Callable[[Task], str | None] = lambda task: "x"  # noqa: E731
    outcome = evaluate_weights(never, never, only_train)
    assert outcome.status == "invalid"
    assert "no test tasks" in outcome.reason


def test_a_lenient_veto_applies_to_weights_too() -> None:
    """The candidate wins on format (exact <answer> tags) while losing the substance."""
    tasks = TaskSet.model_validate(
        {
            "repeats": 1,
            "tasks": [
                {
                    "id": f"n{i}",
                    "prompt": f"{i}+{i}",
                    "regex": "^<answer>",
                    "lenient": {"last_number": str(2 * i)},
                }
                for i in range(6)
            ],
        }
    )
    outcome = evaluate_weights(
        lambda task: "<answer>0</answer>",
        lambda task: str(2 * int(task.id[1:])),
        tasks,
    )
    assert outcome.status == "failed"
    assert "lenient measure regressed" in outcome.reason
    assert "lenient" in outcome.numbers

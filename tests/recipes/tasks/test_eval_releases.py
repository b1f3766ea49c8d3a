"""`evaluate_releases`: per-release means and intervals, and the gate's own comparison.

A stand-in runner scores a task by the release's file content (deterministic, so the
numbers can be recomputed by hand and by the gate's ``evaluate``); the real
``DirectRunner`` answers through the scripted model, as `reef eval` runs it.
"""

from __future__ import annotations

import json
import random

import pytest

from recipes.tasks import DirectRunner, Task, TaskRun, TaskSet, evaluate
from recipes.tasks.eval_releases import evaluate_releases, held_out, parse_releases
from recipes.tasks.evaluation import run_side
from reef_cli.core import scenarios
from reef_cli.core.budget import Budget
from reef_cli.core.errors import ReleaseNotFound, TaskSetError
from reef_cli.core.llm import ModelClient
from reef_cli.core.paired_rule import decide
from reef_cli.core.publishing import publish_files
from reef_cli.core.tree import starter_tree
from tests.fakes.scripted import Scripted
from tests.fakes.upstream import Turn

MARKERS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta")


def tree(*markers: str, extra: str = "") -> dict[str, str]:
    files = starter_tree().files()
    if markers or extra:
        files["rules/knows.md"] = "Remember: " + " ".join(markers) + f" {extra}\n"
    return files


@pytest.fixture
def scenario() -> scenarios.Scenario:
    """r1: knows nothing; r2: four of six markers; r3: all six, and an outage marker."""
    found = scenarios.create("demo")
    publish_files(found, tree(), reason="start")
    publish_files(found, tree(*MARKERS[:4]), reason="four")
    publish_files(found, tree(*MARKERS, extra="OUTAGE"), reason="six")
    return found


def task_set(**settings: object) -> TaskSet:
    tasks = [{"id": f"t-{m}", "prompt": f"say {m}", "contains": m} for m in MARKERS]
    tasks.append({"id": "train-1", "prompt": "x", "contains": "x", "split": "train"})
    return TaskSet.model_validate({"name": "markers", "repeats": 2, "tasks": tasks, **settings})


class ByContent:
    """Scores 1 when the task's marker is in the tree, else 0; a tree holding OUTAGE
    gives no score on the zeta task (an evaluator outage). ``noise``: a seeded jitter."""

    def __init__(self, noise: float = 0.0, seed: int = 7) -> None:
        self.noise = noise
        self.rng = random.Random(seed)
        self.calls: list[tuple[str, str]] = []

    def run_task(self, files: dict[str, str], task: Task) -> TaskRun:
        text = "".join(files.values())
        self.calls.append((task.id, text))
        if "OUTAGE" in text and task.id == "t-zeta":
            return TaskRun(None, "", "outage")
        score = 1.0 if (task.contains or "") in text else 0.0
        if self.noise:
            score = min(1.0, max(0.0, score + self.rng.uniform(-self.noise, self.noise)))
        lenient = 1.0 if task.lenient is not None else None
        return TaskRun(score, "answer", "by content", lenient=lenient)


def test_numbers_equal_decide_and_the_gates_evaluate(scenario: scenarios.Scenario) -> None:
    tasks = task_set()
    report = evaluate_releases(scenario, tasks, [1, 2], ByContent())
    first, second = report.releases
    assert (first.number, second.number) == (1, 2)
    assert first.mean == 0.0 and second.mean == round(4 / 6, 4)
    assert first.tasks == second.tasks == 6  # the train task is held out of the report
    assert first.runs == second.runs == 12 and first.invalid == second.invalid == 0
    assert first.comparison is None
    # by hand: the same paired scores through decide(), with the task set's policy
    chain = scenario.chain()
    test = held_out(tasks)
    r1, r2 = (chain.files(chain.get(n)) for n in (1, 2))
    s1, _ = run_side(r1, test.tasks, 2, ByContent().run_task)
    s2, _ = run_side(r2, test.tasks, 2, ByContent().run_task)
    expected = decide(s2, s1, test.policy())
    assert second.comparison == {"against": 1, **expected.to_json()}
    numbers = second.comparison["numbers"]
    assert (numbers["wins"], numbers["losses"], numbers["ties"]) == (4, 0, 2)
    assert numbers["p"] == 0.0625 and numbers["mean_diff"] == round(4 / 6, 4)
    # and the gate's own evaluate (candidate r2 vs incumbent r1) gives the same numbers
    gate = evaluate(r2, r1, test, ByContent().run_task)
    assert gate.numbers == numbers and gate.status == second.comparison["status"]
    assert second.ci95 == expected.numbers["candidate_ci95"]
    assert first.ci95 == expected.numbers["incumbent_ci95"]
    data = json.loads(json.dumps(report.to_json()))  # JSON-serialisable as it is
    assert data["releases"][1]["vs_first"] == expected.numbers
    assert data["releases"][1]["verdict"] == {
        "against": 1,
        "status": expected.status,
        "reason": expected.reason,
    }
    assert data["releases"][0]["vs_first"] is None and data["baseline"] == 1


def test_a_release_against_itself_has_an_interval_containing_zero(
    scenario: scenarios.Scenario,
) -> None:
    exact = evaluate_releases(scenario, task_set(), [2, 2], ByContent())
    numbers = exact.releases[1].comparison["numbers"]  # type: ignore[index]
    assert numbers["mean_diff"] == 0.0 and numbers["diff_ci95"] == [0.0, 0.0]
    assert exact.releases[1].comparison["status"] == "failed"  # type: ignore[index]
    # with a noisy evaluator, each entry runs on its own: a real A/A test
    noisy = evaluate_releases(scenario, task_set(repeats=3), [2, 2], ByContent(noise=0.3))
    numbers = noisy.releases[1].comparison["numbers"]  # type: ignore[index]
    low, high = numbers["diff_ci95"]
    assert low < 0 < high and numbers["mean_diff"] != 0.0
    assert noisy.releases[0].mean != noisy.releases[1].mean  # the two runs really differ


def test_invalid_runs_are_counted_and_the_comparison_is_invalid(
    scenario: scenarios.Scenario,
) -> None:
    report = evaluate_releases(scenario, task_set(), [1, 3], ByContent())
    third = report.releases[1]
    assert third.runs == 12 and third.invalid == 2  # t-zeta, both repeats
    assert third.tasks == 5 and third.mean == 1.0  # the mean is over tasks with a score
    assert "t-zeta" not in third.per_task
    assert third.comparison is not None and third.comparison["status"] == "invalid"
    assert third.comparison["numbers"] == {"failed_tasks": ["t-zeta"]}
    assert "no valid score" in third.comparison["reason"]


def test_lenient_measure_is_reported_and_compared(scenario: scenarios.Scenario) -> None:
    data = task_set().model_dump()
    for task in data["tasks"]:
        task["lenient"] = {"contains": "e"}
    tasks = TaskSet.model_validate(data)
    report = evaluate_releases(scenario, tasks, [1, 2], ByContent())
    assert report.releases[0].lenient == {"tasks": 6, "mean": 1.0, "ci95": [1.0, 1.0]}
    lenient = report.releases[1].comparison["numbers"]["lenient"]  # type: ignore[index]
    assert lenient["mean_diff"] == 0.0 and lenient["tasks"] == 6


def test_progress_ticks_once_per_task_run(scenario: scenarios.Scenario) -> None:
    seen: list[tuple[str, float | None]] = []
    evaluate_releases(
        scenario, task_set(), [1, 2, 3], ByContent(), progress=lambda m, f=None: seen.append((m, f))
    )
    runs = [s for s in seen if s[1] is not None and s[1] < 1.0]
    assert len(runs) == 3 * 6 * 2
    assert runs[0] == ("r1: t-alpha (1/36)", 0.0) and seen[-1][1] == 1.0


def test_release_specs_resolve_through_the_chain(scenario: scenarios.Scenario) -> None:
    assert parse_releases(scenario, "1,latest") == [1, 3]
    assert parse_releases(scenario, "r2") == [2]
    assert parse_releases(scenario, " 3 , previous ") == [3, 2]
    with pytest.raises(ReleaseNotFound, match="r9 does not exist"):
        parse_releases(scenario, "1,9")
    with pytest.raises(ReleaseNotFound, match="not a release"):
        parse_releases(scenario, "1,nope")
    with pytest.raises(ReleaseNotFound, match="no release named"):
        parse_releases(scenario, " , ")
    with pytest.raises(ReleaseNotFound):
        evaluate_releases(scenario, task_set(), [1, 7], ByContent())


def test_a_task_set_without_a_test_split_is_refused(scenario: scenarios.Scenario) -> None:
    only_train = TaskSet.model_validate(
        {"tasks": [{"id": "a", "prompt": "p", "contains": "x", "split": "train"}]}
    )
    with pytest.raises(TaskSetError, match="no test tasks") as caught:
        evaluate_releases(scenario, only_train, [1, 2], ByContent())
    assert "split: test" in caught.value.one_line()


def test_direct_runner_through_the_scripted_model(
    scenario: scenarios.Scenario, scripted: Scripted
) -> None:
    """The real DirectRunner: each release's rules reach the model as the system prompt,
    answers are graded, and an outage (HTTP 500) is an invalid run, not a zero."""
    tasks = TaskSet.model_validate(
        {
            "name": "answers",
            "repeats": 1,
            "runner": "direct",
            "tasks": [
                {"id": f"q{i}", "prompt": f"question {i}", "exact": str(i)} for i in range(1, 5)
            ],
        }
    )
    # r1 answers wrong, r2 right on three of four; then r2 again with one outage
    scripted.push("no", "no", "no", "no")
    scripted.push("1", "2", "3", "wrong")
    scripted.push("1", "2", "3")
    scripted.fake.push(Turn(status=500, error="upstream down"))
    model = ModelClient(
        "openai/scripted", api_base=scripted.api_base, budget=Budget(), retries=0, timeout=20
    )
    report = evaluate_releases(scenario, tasks, [1, 2, 2], DirectRunner(model))
    r1, r2, again = report.releases
    assert (r1.mean, r2.mean) == (0.0, 0.75)
    assert r1.invalid == r2.invalid == 0 and again.invalid == 1 and again.tasks == 3
    expected = decide(
        {"q1": [1.0], "q2": [1.0], "q3": [1.0], "q4": [0.0]},
        {"q1": [0.0], "q2": [0.0], "q3": [0.0], "q4": [0.0]},
        tasks.policy(),
    )
    assert r2.comparison == {"against": 1, **expected.to_json()}
    assert again.comparison is not None and again.comparison["status"] == "invalid"
    calls = scripted.inference()
    assert len(calls) == 12
    system = [c.body["messages"][0] for c in calls]
    assert all("Remember: alpha beta gamma delta" in s["content"] for s in system[4:8])
    assert not any("Remember:" in json.dumps(c.body) for c in calls[:4])

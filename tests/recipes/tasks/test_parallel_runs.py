"""Tasks run at once when the runner says it may (the embedded model's slots): the
results keep the tasks' order, an agent runner stays one at a time, and a hosted model
is never sent more than one call at a time."""

from __future__ import annotations

import threading
import time

import pytest

from recipes.tasks import DirectRunner, Task, TaskRun
from recipes.tasks.evaluation import run_side
from recipes.tasks.runners import parallelism
from reef_cli.core.llm import EMBEDDED, ModelClient

TASKS = [Task(id=f"t{i}", prompt=f"{i}?", exact=str(i)) for i in range(6)]


class Counting:
    """A run_task that notes how many runs overlap, and scores task i as i / 10."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0

    def __call__(self, files: dict[str, str], task: Task) -> TaskRun:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.05)
        with self.lock:
            self.now -= 1
        return TaskRun(int(task.id[1:]) / 10, task.id, "ok")


def test_workers_run_tasks_at_once_and_keep_their_order() -> None:
    counting = Counting()
    ticks: list[str] = []
    scores, _ = run_side({}, TASKS, 2, counting, lambda t: ticks.append(t.id), workers=3)
    assert counting.most == 3
    assert list(scores) == [t.id for t in TASKS]
    assert scores["t4"] == [0.4, 0.4]
    assert sorted(ticks) == sorted(t.id for t in TASKS for _ in range(2))


def test_one_worker_is_one_at_a_time() -> None:
    counting = Counting()
    serial, _ = run_side({}, TASKS, 1, counting)
    assert counting.most == 1
    assert serial == run_side({}, TASKS, 1, Counting(), workers=4)[0]


def test_the_runner_says_how_many(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REEF_EMBEDDED_SLOTS", "4")
    assert parallelism(DirectRunner(ModelClient(EMBEDDED))) == 4
    assert parallelism(DirectRunner(ModelClient("openai/x", api_base="http://h"))) == 1
    assert parallelism(object()) == 1  # an agent runner: its sandbox, one trial at a time
    monkeypatch.setenv("REEF_EMBEDDED_SLOTS", "1")
    assert parallelism(DirectRunner(ModelClient(EMBEDDED))) == 1

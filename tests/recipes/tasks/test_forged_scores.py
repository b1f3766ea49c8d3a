"""An answer cannot forge its own score (issue 23 item 2), end to end through `reef eval`.

A scripted model gives each forged answer; the real sandbox runs the real checks. Each
forgery scored 1.0 when the judged code ran in the process that gives the verdict: now the
answer runs in a child of its own, and what it does there cannot pass. Genuine answers
still score 1. The lenient measure runs the same check, so it must hold too.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from recipes.tasks.checks import PYTHON
from reef_cli.core import scenarios
from reef_cli.core.publishing import publish_files
from reef_cli.core.tree import starter_tree
from tests.cli.helpers import reef
from tests.fakes.scripted import Scripted

pytestmark = pytest.mark.skipif(
    not (shutil.which("bwrap") and sys.platform.startswith("linux") and Path(PYTHON).exists()),
    reason="the code scorers need bubblewrap and a system python3",
)

Eval = Callable[[list[dict[str, Any]], list[str]], dict[str, Any]]


@pytest.fixture
def evaluate(tmp_path: Path, scripted: Scripted, monkeypatch: pytest.MonkeyPatch) -> Eval:
    """``evaluate(tasks, answers)``: `reef eval --json` of release 1 on ``tasks``, the
    scripted model giving ``answers`` in task order; returns the release's entry."""
    scenarios.create("demo")
    publish_files("demo", starter_tree().files(), reason="start")
    monkeypatch.setenv("REEF_MODEL", "openai/scripted")
    monkeypatch.setenv("REEF_API_BASE", scripted.api_base)

    def run(tasks: list[dict[str, Any]], answers: list[str]) -> dict[str, Any]:
        path = tmp_path / "tasks.yaml"
        path.write_text(
            yaml.safe_dump({"name": "forged", "runner": "direct", "repeats": 1, "tasks": tasks})
        )
        scripted.push(*answers)
        out = reef("eval", "-s", "demo", "--tasks", str(path), "--releases", "1", "--json")
        (entry,) = json.loads(out)["releases"]
        assert entry["invalid"] == 0, entry  # a score, not an outage
        return dict(entry)

    return run


def fenced(code: str) -> str:
    return "Here it is:\n```python\n" + code + "```\n"


# -- the python scorer -------------------------------------------------------------------

# The check every forgery below beat: it ran the answer inside the judging process.
EXECS_THE_ANSWER = """
def check(answer):
    space = {}
    exec(answer, space)
    return space["add"](2, 3) == 5
"""

# The safe way (docs/tasks.md): the answer runs in a child, the test runs here.
CALLS_THE_ANSWER = """
import reef_check

def check(answer):
    return reef_check.call(answer, "add", 2, 3) == 5
"""

WRONG_ADD = "def add(a, b):\n    return 0\n"

PYTHON_FORGERIES = {
    # the result fd the runner keeps for itself, with the mark from argv, then a quick exit
    "score fd and os._exit": (
        "import os, sys\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(fd, (sys.argv[-1] + ' {\"score\": 1.0}\\n').encode())\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)\n"
    ),
    # the runner's own globals, reached through __main__: its output stream rewritten
    "through __main__": (
        "import __main__\n"
        "real = __main__.out\n"
        "class Forged:\n"
        "    def write(self, text):\n"
        "        real.write(__main__.mark + ' {\"score\": 1.0}\\n')\n"
        "    def flush(self):\n"
        "        real.flush()\n"
        "__main__.out = Forged()\n" + WRONG_ADD
    ),
    # the serialiser the runner writes its result with
    "json.dumps replaced": (
        "import json\njson.dumps = lambda *a, **k: '{\"score\": 1.0}'\n" + WRONG_ADD
    ),
    # from a child: the judge's fds through /proc (the mark from its cmdline), then kill it
    "the judge's fds through /proc": (
        "import os\n"
        "judge = os.getppid()\n"
        "mark = open(f'/proc/{judge}/cmdline', 'rb').read().split(b'\\0')[-2]\n"
        "for pid in (judge, 1):\n"
        "    for fd in range(64):\n"
        "        try:\n"
        "            with open(f'/proc/{pid}/fd/{fd}', 'wb') as f:\n"
        "                f.write(mark + b' {\"score\": 1.0}\\n')\n"
        "        except OSError:\n"
        "            pass\n"
        "os.kill(judge, 9)\n"
    ),
}


@pytest.mark.parametrize("name", list(PYTHON_FORGERIES))
@pytest.mark.parametrize("check", [EXECS_THE_ANSWER, CALLS_THE_ANSWER], ids=["exec", "call"])
def test_a_forged_python_answer_scores_zero(evaluate: Eval, name: str, check: str) -> None:
    task = {"id": "add", "prompt": "Write add(a, b).", "python": check}
    entry = evaluate([task], [PYTHON_FORGERIES[name]])
    assert entry["per_task"] == {"add": 0.0}, entry


REACHES_THE_JUDGE = """
import os

def reach():
    judge = os.getppid()
    reached = []
    for what, mode in (("mem", "r+b"), ("environ", "rb")):
        try:
            open(f"/proc/{judge}/{what}", mode).close()
            reached.append(what)
        except OSError:
            pass
    try:
        os.listdir(f"/proc/{judge}/fd")
        reached.append("fd")
    except OSError:
        pass
    return reached
"""


def test_the_judge_is_out_of_the_answers_reach(evaluate: Eval) -> None:
    """Its memory (where a same-user process could patch the verdict), environment and fds:
    1.0 here means the answer's process reached none of them."""
    check = (
        "import reef_check\ndef check(answer):\n    return reef_check.call(answer, 'reach') == []\n"
    )
    task = {"id": "reach", "prompt": "Write reach().", "python": check}
    entry = evaluate([task], [REACHES_THE_JUDGE])
    assert entry["per_task"] == {"reach": 1.0}, entry


def test_a_check_that_execs_the_answer_cannot_pass_even_a_right_one(
    evaluate: Eval, scripted: Scripted
) -> None:
    tasks = [
        {"id": "exec", "prompt": "Write add(a, b).", "python": EXECS_THE_ANSWER},
        {"id": "call", "prompt": "Write add(a, b).", "python": CALLS_THE_ANSWER},
    ]
    right = "def add(a, b):\n    return a + b\n"
    entry = evaluate(tasks, [right, right])
    assert entry["per_task"] == {"exec": 0.0, "call": 1.0}, entry


# -- the shipped human-eval check ---------------------------------------------------------


def human_eval(*numbers: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The shipped tasks for these problems (as `reef tasks make` writes them) and the
    problems themselves."""
    from recipes.tasks.sources import SOURCES, human_eval

    if not SOURCES["human-eval"].installed:
        pytest.skip("human-eval (the reef[tasks] extra) is not installed")
    every = human_eval.make(train=0, val=0, test=None, seed=1)
    ids = [f"humaneval-{n:03d}" for n in numbers]
    tasks = [t.model_dump(exclude_none=True) for t in every.tasks if t.id in ids]
    problems = {p["task_id"]: p for p in human_eval.problems()}
    return tasks, [problems[f"HumanEval/{n}"] for n in numbers]


WRONG_CLOSE = "def has_close_elements(numbers, threshold):\n    return False\n"

HUMAN_EVAL_FORGERIES = {
    "posix._exit": "import posix\nposix._exit(0)\n",
    "os.execv /bin/true": "import os\nos.execv('/bin/true', ['true'])\n",
    "ctypes _exit": "import ctypes\nctypes.CDLL(None)._exit(0)\n",
    "importlib.reload(os)": "import importlib, os\nimportlib.reload(os)\nos._exit(0)\n",
    "atexit": "import atexit, posix\natexit.register(posix._exit, 0)\n" + WRONG_CLOSE,
    "equal to everything": (
        "class Yes:\n"
        "    def __eq__(self, other):\n"
        "        return True\n"
        "    def __bool__(self):\n"
        "        return True\n"
        "def has_close_elements(numbers, threshold):\n"
        "    return Yes()\n"
    ),
    "kills the judge": "import os\nos.kill(os.getppid(), 9)\n",
}


@pytest.mark.parametrize("name", list(HUMAN_EVAL_FORGERIES))
def test_a_forged_human_eval_answer_scores_zero_strict_and_lenient(
    evaluate: Eval, name: str
) -> None:
    tasks, _ = human_eval(0)
    entry = evaluate(tasks, [fenced(HUMAN_EVAL_FORGERIES[name])])
    assert entry["per_task"] == {"humaneval-000": 0.0}, entry
    assert entry["lenient"] == {"tasks": 1, "mean": 0.0, "ci95": [0.0, 0.0]}, entry


def test_genuine_human_eval_answers_still_pass(evaluate: Eval) -> None:
    """Problems whose tests call the entry point by name (33), use the prompt's helpers
    (32: poly, 38: encode_cyclic) and floats, tuples and dicts crossing the pipe."""
    numbers = (0, 32, 33, 38, 95, 155)
    tasks, problems = human_eval(*numbers)
    answers = [fenced(p["prompt"] + p["canonical_solution"]) for p in problems]
    by_id = {t["id"]: t for t in tasks}
    ordered = [by_id[f"humaneval-{n:03d}"] for n in numbers]
    entry = evaluate(ordered, answers)
    assert entry["per_task"] == {t["id"]: 1.0 for t in ordered}, entry
    assert entry["lenient"]["mean"] == 1.0, entry

"""A scorer added as CONTRIBUTING.md shows it works: the page's edits to Reef's own files
(the field on ``Scorer``, the function, its row in ``SCORING``), applied to a copy of
Reef's ``recipes`` package, load the page's task set and score its answers.

No file of Reef's is touched: the patched copy comes first on ``PYTHONPATH`` for fresh
processes (``reef tasks show``, a short script that grades answers). Reef as it is refuses
the same task set in one line, so the edits are what make it load."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from recipes.tasks import load
from recipes.tasks.model import SCORER_SETTINGS
from reef_cli.core.errors import TaskSetError
from tests.contributing import edits, examples

REEF = Path(__file__).resolve().parents[3]
SCORER = "word_count_at_most"
TASK_SET = "short-answers.yaml"

# grades every answer given for each task of a set, with the copy on the path
GRADE = """
import json, sys
from pathlib import Path
from recipes.tasks import SCORERS, grade, load, scoring
answers = json.loads(sys.argv[2])
graded = {
    t.id: [[r.score, r.lenient, r.feedback] for r in (grade(t, a) for a in answers[t.id])]
    for t in load(Path(sys.argv[1])).tasks
}
found = {"module": scoring.__file__, "scorers": SCORERS, "table": list(scoring.SCORING)}
print(json.dumps({**found, "graded": graded}))
"""


def _apply(lines: list[str], where: str, name: str, body: str) -> list[str]:
    """``lines`` with ``body`` put where the page says: ``in Scorer`` above its first
    setting, ``in SCORING`` before the table's closing brace, ``above SCORING`` above the
    table and the comment over it."""
    added = body.rstrip("\n").split("\n")
    start = next(
        (i for i, ln in enumerate(lines) if ln.startswith((f"class {name}(", f"{name}:"))), None
    )
    assert start is not None, f"{name} is not where the page's edit goes"
    if where == "above":
        while lines[start - 1].startswith("#"):
            start -= 1
        return [*lines[:start], *added, "", "", *lines[start:]]
    settings = tuple(f"    {s}:" for s in SCORER_SETTINGS)
    end = next(
        i
        for i, ln in enumerate(lines[start:], start)
        if ln.startswith(settings) or ln == "}"  # a class's settings, a table's end
    )
    return [*lines[:end], *added, *lines[end:]]


@pytest.fixture
def patched(tmp_path: Path) -> dict[str, str]:
    """Reef's ``recipes`` with the page's edits, first on the path of a fresh process (the
    environment to run it with)."""
    site = tmp_path / "site"
    shutil.copytree(
        REEF / "recipes", site / "recipes", ignore=shutil.ignore_patterns("__pycache__")
    )
    shown = edits("recipes/")
    assert {(path, where, name) for path, where, name, _ in shown} == {
        ("recipes/tasks/model.py", "in", "Scorer"),
        ("recipes/tasks/scoring.py", "above", "SCORING"),
        ("recipes/tasks/scoring.py", "in", "SCORING"),
    }
    for path, where, name, body in shown:
        target = site / path
        target.write_text("\n".join(_apply(target.read_text().split("\n"), where, name, body)))
    path = os.pathsep.join(filter(None, [str(site), str(REEF), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


@pytest.fixture
def task_set(tmp_path: Path) -> Path:
    """The page's task set, as a file."""
    path = tmp_path / TASK_SET
    path.write_text(examples(TASK_SET)[TASK_SET])
    return path


def run(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A fresh Python on the patched copy (``cwd`` away from Reef's tree, whose own
    ``recipes`` would come first)."""
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd
    )


def words(n: int) -> str:
    return " ".join(["word"] * n)


def test_reef_as_it_is_refuses_the_task_set_in_one_line(task_set: Path) -> None:
    with pytest.raises(TaskSetError) as caught:
        load(task_set)
    line = caught.value.one_line()
    assert f"tasks.0.{SCORER}" in line and str(task_set) in line and "\n" not in line


def test_the_edits_make_a_scorer_that_scores_the_task_set(
    patched: dict[str, str], task_set: Path, tmp_path: Path
) -> None:
    tasks: list[dict[str, Any]] = yaml.safe_load(task_set.read_text())["tasks"]
    assert all(SCORER in t for t in tasks), tasks
    answers = {
        t["id"]: [words(t[SCORER]), words(t[SCORER] + 1), "It gives an overloaded server time."]
        for t in tasks
    }
    done = run(patched, tmp_path, "-c", GRADE, str(task_set), json.dumps(answers))
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert Path(found["module"]).is_relative_to(tmp_path)  # the copy, not Reef's own
    # the field and the row agree, as tests/recipes/tasks/test_scoring.py asks
    assert SCORER in found["scorers"] and set(found["scorers"]) == set(found["table"])
    for t in tasks:
        limit = t[SCORER]
        at, over, short = found["graded"][t["id"]]
        assert at[0] == 1.0 and short[0] == 1.0, found["graded"]
        assert over[0] == 0.0, found["graded"]
        assert f"{limit} words" in over[2] and f"{limit + 1}" in over[2]  # wanted, got
        assert at[1] == 0.0  # the lenient measure: no substance in "word word ..."
    assert found["graded"]["why-backoff"][2][1] == 1.0  # "server" and "load" are there
    assert found["graded"]["put-idempotent"][2][1] == 0.0  # "same" and "once" are not


def test_reef_tasks_show_counts_it_and_an_unknown_key_is_still_one_line(
    patched: dict[str, str], task_set: Path, tmp_path: Path
) -> None:
    shown = run(patched, tmp_path, "-m", "reef_cli", "tasks", "show", str(task_set), "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["scorers"] == {SCORER: 2}
    typo = tmp_path / "typo.yaml"
    typo.write_text(task_set.read_text().replace(f"{SCORER}:", "word_count_at_mots:", 1))
    refused = run(patched, tmp_path, "-m", "reef_cli", "tasks", "show", str(typo))
    lines = [ln for ln in refused.stderr.splitlines() if ln.strip()]
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr
    assert "tasks.0.word_count_at_mots" in lines[0] and str(typo) in lines[0]

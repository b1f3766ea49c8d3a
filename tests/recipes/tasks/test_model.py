"""The task-set file format: old files load unchanged, every scorer kind parses, and bad
files fail with one line naming the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recipes.tasks import SCORERS, TaskSet, load
from reef_cli.core.errors import TaskSetError

OLD = """\
repeats: 2
method: sign
min_effect: 0.0
tasks:
  - id: failing-test
    prompt: "There is a bug in add(): 2 + 2 gives 5. What is your first step?"
    expect: ["failing test"]
    protected: false
"""


def test_an_old_tasks_yaml_loads_unchanged_and_is_all_test(tmp_path: Path) -> None:
    path = tmp_path / "tasks.yaml"
    path.write_text(OLD)
    tasks = load(path)
    assert [t.id for t in tasks.tasks] == ["failing-test"]
    task = tasks.tasks[0]
    assert task.kind == "expect" and task.split == "test" and task.files == {}
    assert tasks.counts() == {"train": 0, "val": 0, "test": 1}
    assert tasks.only("train", "val") is None
    assert tasks.runner is None and tasks.repeats == 2


EXAMPLES = {
    "expect": ["x"],
    "exact": "-4",
    "regex": r"\bdone\b",
    "contains": "42",
    "last_number": "-4",
    "python": "def check(answer):\n    return answer == 'x'\n",
    "command": "python3 -m pytest -q",
    "judge": "The answer names the root cause.",
    "reasoning_gym": {"dataset": "chain_sum", "entry": {"question": "1+1=", "answer": "2"}},
}


@pytest.mark.parametrize("kind", SCORERS)
def test_each_scorer_kind_parses(kind: str) -> None:
    tasks = TaskSet.model_validate(
        {"tasks": [{"id": "a", "prompt": "p", "split": "train", kind: EXAMPLES[kind]}]}
    )
    assert tasks.tasks[0].kind == kind
    assert set(EXAMPLES) == set(SCORERS)


def test_jsonl_is_one_task_per_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    rows = [
        {"id": "a", "prompt": "1+1=", "exact": "2", "split": "train"},
        {"id": "b", "prompt": "2+2=", "exact": "4", "lenient": {"last_number": "4"}},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    tasks = load(path)
    assert [t.split for t in tasks.tasks] == ["train", "test"]
    assert tasks.tasks[1].lenient is not None and tasks.tasks[1].lenient.kind == "last_number"


@pytest.mark.parametrize(
    ("text", "suffix", "message"),
    [
        ("tasks: [", ".yaml", "not valid YAML: expected"),
        ("tasks:\n  - {id: a, prompt: p, exact: 2020-02-30}\n", ".yaml", "a value it cannot read"),
        ("tasks: " + "[" * 3000 + "]" * 3000, ".yaml", "nested too deeply"),
        ('{"id": "a"\n', ".jsonl", "line 1 is not JSON"),
        ("tasks:\n  - {id: a, prompt: p}\n", ".yaml", "exactly one scorer"),
        ("tasks:\n  - {id: a, prompt: p, exact: '1', regex: x}\n", ".yaml", "got exact, regex"),
        ("tasks:\n  - {id: a, prompt: p, regex: '('}\n", ".yaml", "not a regular expression"),
        ("tasks:\n  - {id: a, prompt: p, last_number: ten}\n", ".yaml", "not a number"),
        ("tasks:\n  - {id: a, prompt: p, exact: '1', split: dev}\n", ".yaml", "split"),
        (
            "tasks:\n  - {id: a, prompt: p, exact: '1', files: {'../x': y}}\n",
            ".yaml",
            "relative path",
        ),
        (
            "tasks:\n  - {id: a, prompt: p, exact: '1'}\n  - {id: a, prompt: q, exact: '2'}\n",
            ".yaml",
            "appears twice",
        ),
        ("tasks: []\n", ".yaml", "tasks"),
    ],
)
def test_bad_files_fail_with_one_line(tmp_path: Path, text: str, suffix: str, message: str) -> None:
    path = tmp_path / f"t{suffix}"
    path.write_text(text)
    with pytest.raises(TaskSetError) as caught:
        load(path)
    line = caught.value.one_line()
    assert message in line and str(path) in line and "\n" not in line
    assert caught.value.exit_code == 2


def test_a_missing_file_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(TaskSetError, match="cannot read task set"):
        load(tmp_path / "nope.yaml")

"""Reading a task set from a file: YAML (a mapping with ``tasks:``) or JSONL (one task per
line, default settings). Every problem is a ``TaskSetError`` naming the file and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from recipes.tasks.model import TaskSet
from recipes.tasks.sources import retired_source
from reef_cli.core import yaml_config
from reef_cli.core.errors import TaskSetError
from reef_cli.core.scenarios import Scenario

TASKS_FILE = "tasks.yaml"
HINT = "see docs/tasks.md for the format"


def _jsonl(path: Path, text: str) -> dict[str, Any]:
    tasks = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            tasks.append(json.loads(line))
        except (json.JSONDecodeError, RecursionError):
            raise TaskSetError(f"task set {path}: line {number} is not JSON", HINT) from None
    return {"tasks": tasks}


def load(path: Path) -> TaskSet:
    text = yaml_config.read_text(path, f"task set {path}", error=TaskSetError, fix=HINT)
    if path.suffix == ".jsonl":
        data: Any = _jsonl(path, text)
    else:
        data = yaml_config.parse(text, f"task set {path}", error=TaskSetError, fix="fix the file")
    try:
        tasks = TaskSet.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "the file"
        raise TaskSetError(f"task set {path}: {where}: {err['msg']}", HINT) from exc
    _refuse_retired_files(path, tasks)
    return tasks


def _refuse_retired_files(path: Path, tasks: TaskSet) -> None:
    """A set made by an older Reef may carry a check it has since retired because an
    answer could forge its own pass: its scores cannot be trusted, so it is not used."""
    for task in tasks.tasks:
        for name, text in (task.files or {}).items():
            source = retired_source(text)
            if source is not None:
                raise TaskSetError(
                    f"task set {path}: task {task.id}'s {name} is a check an older Reef "
                    f"shipped for {source.name}, which an answer can forge",
                    f"make the set again: reef tasks make {source.name} -o {path.name}",
                )


def for_scenario(scenario: Scenario, explicit: Path | None = None) -> TaskSet | None:
    """The task set a job evaluates on: ``explicit`` (must exist), else the scenario's
    ``tasks.yaml`` if it has one, else none (the trial alone judges)."""
    if explicit is not None:
        if not explicit.exists():
            raise TaskSetError(
                f"task set {explicit} does not exist", "pass an existing --tasks FILE"
            )
        return load(explicit)
    own = scenario.path / TASKS_FILE
    return load(own) if own.exists() else None

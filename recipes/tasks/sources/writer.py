"""Writing a generated task set: readable YAML that ``recipes.tasks.load`` reads back, put in
place whole (a temp file renamed over the target) so a failure leaves no partial file."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from recipes.tasks.model import TaskSet
from reef_cli.core.errors import TaskSetError

TASK_FIRST = ("id", "split", "prompt")


class _Dumper(yaml.SafeDumper):
    """Multi-line text as ``|`` blocks (prompts, check scripts stay readable)."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def _task(data: dict[str, Any]) -> dict[str, Any]:
    return {**{k: data[k] for k in TASK_FIRST if k in data}, **data}


def dump(taskset: TaskSet) -> str:
    """The task set as YAML: defaults left out, each task's id, split and prompt first."""
    data = taskset.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    data["tasks"] = [_task(t) for t in data["tasks"]]
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def check_target(path: Path, force: bool) -> None:
    """Refuse before any work is done: an existing file (unless ``force``), a missing dir."""
    if path.is_dir():
        raise TaskSetError(f"{path} is a directory", "pass a file name, e.g. -o tasks.yaml")
    if path.exists() and not force:
        raise TaskSetError(f"{path} already exists", "pass --force to overwrite it")
    if not path.parent.is_dir():
        raise TaskSetError(f"directory {path.parent} does not exist", "create it first")
    if path.suffix not in (".yaml", ".yml"):
        raise TaskSetError(f"{path} is not a .yaml file", "name the output e.g. tasks.yaml")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write(path: Path, text: str, force: bool) -> None:
    """Put ``text`` at ``path`` in one step (no partial file, whatever fails)."""
    check_target(path, force)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(tmp, 0o666 & ~_umask())
        if force:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # fails if the file appeared meanwhile: never overwrite it
    except FileExistsError as exc:
        raise TaskSetError(f"{path} already exists", "pass --force to overwrite it") from exc
    except OSError as exc:
        raise TaskSetError(f"cannot write {path}: {exc.strerror}", "check the path") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)

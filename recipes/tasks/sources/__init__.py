"""Shipped external task sets: generators that turn a benchmark package into a task-set file.

Each source lives in its own module and imports its package only when it runs (the
optional extra ``reef[tasks]``), so listing the sources costs nothing and a missing package
is an ``ExtraMissing`` naming the install, never an ImportError. Generating never touches
the network: a source whose package needs it at import time is listed as unavailable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recipes.tasks.sources.catalog import (
    DEFAULT_SIZES,
    INSTALL,
    MAX_TASKS,
    SOURCES,
    Source,
    check_sizes,
    require,
    retired_source,
)
from reef_cli.core.errors import TaskSetError

if TYPE_CHECKING:
    from recipes.tasks.model import TaskSet

__all__ = [
    "DEFAULT_SIZES",
    "INSTALL",
    "MAX_TASKS",
    "SOURCES",
    "Source",
    "check_sizes",
    "make",
    "require",
    "retired_source",
]


def make(
    name: str,
    *,
    datasets: list[str] | None = None,
    train: int | None = None,
    val: int | None = None,
    test: int | None = None,
    seed: int = 1,
) -> TaskSet:
    """A task set from the source called ``name``; unset sizes take its defaults."""
    require(name)
    d_train, d_val, d_test = DEFAULT_SIZES[name]
    n_train = d_train if train is None else train
    n_val = d_val if val is None else val
    n_test = d_test if test is None else test
    if name == "reasoning-gym":
        from recipes.tasks.sources import reasoning_gym

        return reasoning_gym.make(datasets or [], n_train, n_val, n_test or 0, seed)
    if datasets is not None:
        raise TaskSetError("--datasets is for reasoning-gym only", "drop --datasets")
    from recipes.tasks.sources import human_eval

    return human_eval.make(n_train, n_val, n_test, seed)

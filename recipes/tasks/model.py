"""The task-set file format: tasks with a split, optional project files and one scorer.

A task names exactly one scorer (the keys below); ``lenient`` may name a second, looser
measure of the same answer — the gate vetoes a candidate that wins on the scorer while
the lenient measure falls (a format trick that loses the substance)::

    runner: direct              # direct (one model call) or an adapter (pi, claude-code);
                                # unset: the job's agent
    harness_in: system          # direct only: the tree as the system prompt, or in the user turn
    repeats: 2
    method: sign                # sign | bootstrap
    tasks:
      - id: sum-1
        split: train            # train | val | test (default test: the gate's held-out part)
        prompt: "4 - 1 - 7 ="
        exact: "-4"             # or expect / regex / contains / last_number / python /
                                #    command / judge / reasoning_gym
        lenient: {last_number: "-4"}
        files: {"tests/test_x.py": "..."}   # written into the task's project first
        feedback: "Give only the number."   # optional: what a person said about an answer

Scorers: ``expect`` (share of case-insensitive substrings found), ``exact`` (the stripped
answer, or its last ``<answer>`` block, equals the text), ``regex`` (a match anywhere),
``contains`` (the text anywhere), ``last_number`` (the answer's last number equals it),
``python`` (a ``check(answer) -> bool | float`` function, run in the sandbox),
``command`` (a shell command run in the sandbox on the task's files plus ``ANSWER.md``;
exit 0 scores 1), ``judge`` (a model scores the answer against a rubric, 0..1) and
``reasoning_gym`` (the generating dataset's own ``score_answer``).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from reef_cli.core.paired_rule import Policy

# Scorer's fields that are settings, not scorers (every other field names one scorer)
SCORER_SETTINGS = ("timeout_s",)
SPLITS = ("train", "val", "test")
Split = Literal["train", "val", "test"]


class ReasoningGymEntry(BaseModel):
    """What reasoning-gym's ``score_answer(answer, entry)`` needs, kept in the file."""

    model_config = ConfigDict(extra="forbid")
    dataset: str = Field(min_length=1, max_length=64)
    entry: dict[str, Any]


class Scorer(BaseModel):
    """Exactly one way of scoring an answer, 0..1."""

    model_config = ConfigDict(extra="forbid")
    expect: list[str] | None = Field(None, min_length=1, max_length=20)
    exact: str | None = Field(None, max_length=4000)
    regex: str | None = Field(None, min_length=1, max_length=1000)
    contains: str | None = Field(None, min_length=1, max_length=4000)
    last_number: str | None = Field(None, min_length=1, max_length=64)
    python: str | None = Field(None, min_length=1, max_length=20_000)
    command: str | None = Field(None, min_length=1, max_length=2000)
    judge: str | None = Field(None, min_length=1, max_length=4000)
    reasoning_gym: ReasoningGymEntry | None = None
    timeout_s: float = Field(30.0, gt=0, le=600)  # python / command checks

    @model_validator(mode="after")
    def _exactly_one(self) -> Scorer:
        named = [k for k in SCORERS if getattr(self, k) is not None]
        if len(named) != 1:
            have = ", ".join(named) or "none"
            raise ValueError(f"name exactly one scorer of {', '.join(SCORERS)} (got {have})")
        return self

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from exc
        return value

    @field_validator("last_number")
    @classmethod
    def _is_number(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                float(value.replace(",", ""))
            except ValueError as exc:
                raise ValueError(f"not a number: {value!r}") from exc
        return value

    @property
    def kind(self) -> str:
        return next(k for k in SCORERS if getattr(self, k) is not None)


#: the scorer kinds, in the format's order: every field of ``Scorer`` but its settings;
#: ``recipes.tasks.scoring.SCORING`` has one row for each
SCORERS: tuple[str, ...] = tuple(f for f in Scorer.model_fields if f not in SCORER_SETTINGS)


class Served(BaseModel):
    """The served release's own answer to this task's prompt, as recorded, and the score
    the person reported for it: the incumbent's run, with no call (``evaluation``)."""

    model_config = ConfigDict(extra="forbid")
    release: int = Field(ge=1)
    answer: str = Field(max_length=20_000)
    score: float = Field(ge=0, le=1)


class Task(Scorer):
    id: str = Field(min_length=1, max_length=64)
    prompt: str = Field(min_length=1, max_length=20_000)
    split: Split = "test"
    files: dict[str, str] = Field(default_factory=dict, max_length=50)
    protected: bool = False  # a protected task may not regress (veto)
    lenient: Scorer | None = None
    served: Served | None = None  # the incumbent's recorded run (replay tasks)
    # what a person said about an earlier answer to this prompt (a complaint): GEPA's
    # reflection shows it next to the score; no scorer reads it
    feedback: str | None = Field(None, min_length=1, max_length=2000)

    @field_validator("files")
    @classmethod
    def _relative_paths(cls, files: dict[str, str]) -> dict[str, str]:
        for name in files:
            path = PurePosixPath(name)
            if not name or path.is_absolute() or ".." in path.parts or "\\" in name:
                raise ValueError(f"file {name!r} must be a relative path inside the project")
        return files


class TaskSet(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(None, max_length=200)
    source: dict[str, Any] | None = None  # provenance: generator, version, seeds
    runner: str | None = Field(None, max_length=32)  # direct | an adapter; None: the job's
    harness_in: Literal["system", "user"] = "system"
    repeats: int = Field(2, ge=1, le=10)
    method: Literal["sign", "bootstrap"] = "sign"
    alpha: float = Field(0.05, gt=0, lt=1)
    min_effect: float = Field(0.0, ge=0)
    lenient_tolerance: float = Field(0.0, ge=0, le=1)
    # direct only: the most tokens an answer may take (None: the runner's default, 512)
    answer_tokens: int | None = Field(None, ge=1, le=8192)
    tasks: list[Task] = Field(min_length=1, max_length=5000)

    @model_validator(mode="after")
    def _unique_ids(self) -> TaskSet:
        seen: set[str] = set()
        for task in self.tasks:
            if task.id in seen:
                raise ValueError(f"task id {task.id!r} appears twice")
            seen.add(task.id)
        return self

    def split(self, *names: Split) -> list[Task]:
        """The tasks of the named splits, in file order."""
        return [t for t in self.tasks if t.split in names]

    def only(self, *names: Split) -> TaskSet | None:
        """A copy holding only the named splits (None when none of them has a task)."""
        kept = self.split(*names)
        return self.model_copy(update={"tasks": kept}) if kept else None

    def counts(self) -> dict[str, int]:
        return {s: len(self.split(s)) for s in SPLITS}  # type: ignore[arg-type]

    def policy(self) -> Policy:
        return Policy(
            method=self.method,
            alpha=self.alpha,
            min_effect=self.min_effect,
            protected=frozenset(t.id for t in self.tasks if t.protected),
            lenient_tolerance=self.lenient_tolerance,
        )

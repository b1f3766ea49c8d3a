"""The recipe protocol: a recipe reads evidence and proposes candidate trees.

Recipes decide *what* to change; the engine (``recipes.engine``) decides *whether* it
ships: it runs each candidate's trial, the gate and, when the scenario has a task set,
the paired evaluation, and publishes what passes. So every recipe — Reefine, SkillClaw,
GEPA — is held to the same bar.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from adapters.base import Transcript
from recipes.tasks import Task, TaskRun, TaskSet
from reef_cli.core.budget import Budget, BudgetLimits
from reef_cli.core.errors import OptionInvalid
from reef_cli.core.llm import ModelClient
from reef_cli.core.records import Record

Progress = Callable[[str, float | None], None]  # (message, fraction done or None)
# a model call's JSON body, as the agent sent it -> why to stop the agent (None: go on)
Watch = Callable[[Any], "str | None"]
RunTask = Callable[[dict[str, str], Task], TaskRun]  # (tree files, task) -> scored run
Ask = Callable[[str], str]  # a clarifying question -> the person's answer


def no_progress(_message: str, _fraction: float | None = None) -> None:
    return None


@dataclass
class AgentRun:
    """One sandboxed agent run, the records its requests left, and why Reef stopped it
    (a proposer's ``Watch`` said so; None: it ran to its own end or its time ran out)."""

    transcript: Transcript
    records: list[Record] = field(default_factory=list)
    stopped: str | None = None


class AgentSession(Protocol):
    """The job's agent, for a recipe whose proposer is an agent (``drives_agent``):
    ``run_in`` runs it once in the recipe's own folder, sandboxed, through the job's
    recording gateway, its calls and tokens charged to the job's budget."""

    @property
    def agent(self) -> dict[str, str]: ...

    def run_in(
        self,
        workdir: Path,
        files: dict[str, str],
        prompt: str,
        *,
        watch: Watch | None = None,
        timeout: float = ...,
    ) -> AgentRun: ...


@dataclass
class Context:
    """What a recipe may read and use. ``tasks`` holds the task set's train and val
    splits only — the test split is the gate's, and ``run_task`` refuses it — so what a
    recipe searches on is never what it is judged on."""

    scenario: str
    incumbent: dict[str, str]  # files of the served release ({} for an empty chain)
    incumbent_release: int | None
    model: ModelClient
    budget: Budget
    ask: str | None = None
    interactive: bool = False
    clarify: Ask | None = None
    progress: Progress = no_progress
    tasks: TaskSet | None = None
    run_task: RunTask | None = None
    notes: dict[str, Any] = field(default_factory=dict)  # evidence kept whatever the end
    # set by a recipe that found no new evidence: the job ends ``unchanged`` (exit 0), not
    # ``rejected`` — nothing was wrong, there was nothing to learn from
    nothing_new: bool = False
    # set by a recipe that keeps its evidence for a later run (e.g. too few sessions for
    # the gate to ever publish): the job ends ``unchanged`` with this reason, nothing consumed
    held_back: str | None = None
    # how many test tasks the gate evaluates on (None: no task set; a recipe's own replay
    # tasks are used), so a recipe can tell when the gate could never publish
    held_out: int | None = None
    # how many ``run_task`` calls are worth making at once (the embedded model's slots)
    parallelism: int = 1
    # the job's agent, for a recipe that ``drives_agent`` (None for every other recipe)
    agent: AgentSession | None = None


@dataclass
class Change:
    """One typed edit to a tree, as a recipe describes it (stored in release metadata)."""

    kind: str  # rule | skill | command | extension
    name: str
    path: str
    why: str
    summary: str

    @classmethod
    def of_path(cls, path: str, why: str, summary: str | None = None) -> Change:
        """The change that writes ``path``, its kind and name read from the path
        (``skills/tidy/SKILL.md``: the skill ``tidy``; a file outside the kinds: ``file``)."""
        from reef_cli.core.tree import KINDS

        top = path.split("/", 1)[0]
        kind = top.removesuffix("s") if top in KINDS else "file"
        name = path.split("/")[1] if top in KINDS and path.count("/") else path
        return cls(kind, name.removesuffix(".md"), path, why, summary or f"writes {path}")


@dataclass
class Candidate:
    files: dict[str, str]
    reason: str
    changes: list[Change]
    probe: str | None = None  # a prompt the trial runs to show the change loads and is followed
    expect_in_request: list[str] = field(
        default_factory=list
    )  # text the recorded request must hold
    evidence: dict[str, Any] = field(default_factory=dict)
    # tasks the gate evaluates this candidate on when the job has no task set (SkillClaw's
    # replay tasks, built from the sessions it learned from)
    tasks: TaskSet | None = None


class Recipe(Protocol):
    """``propose`` drafts candidates from the evidence; ``revise`` drafts again once the
    quality gate has rejected ``candidate`` for ``reasons`` ([] gives up: rejected).
    ``limits(tasks)``: the recipe's own default limits for a job on ``tasks`` (None:
    ``budget.DEFAULT_LIMITS``) — a search sizes them from the task set;
    ``trials``: its candidates run an agent trial (a probe built from the ask);
    ``requires_tasks``: it searches a task set (train, val; the gate judges on test);
    ``drives_agent`` (optional, see ``drives_agent``): it runs the job's agent itself;
    ``settle(ctx, state)``: called once the job has ended ``state`` (e.g. to move a
    high-water mark only after ``published`` or a gate rejection)."""

    name: str
    trials: bool
    requires_tasks: bool

    def limits(self, tasks: TaskSet | None) -> BudgetLimits | None: ...

    def propose(self, ctx: Context) -> list[Candidate]: ...

    def revise(self, ctx: Context, candidate: Candidate, reasons: list[str]) -> list[Candidate]: ...

    def settle(self, ctx: Context, state: str) -> None: ...


def drives_agent(recipe: object) -> bool:
    """Whether ``recipe`` runs the job's agent itself (``Context.agent``: Meta-Harness's
    proposer), so the job starts the agent's sandboxed gateway even without a trial. An
    optional class attribute: a recipe written before it existed runs no agent of its own."""
    return bool(getattr(recipe, "drives_agent", False))


def refuse_unknown_options(recipe: str, given: Mapping[str, Any], known: Collection[str]) -> None:
    """``OptionInvalid`` naming every option ``recipe`` does not have, and the ones it has."""
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise OptionInvalid(
            f"{recipe} has no option {', '.join(unknown)}; known options: {', '.join(known)}",
            "drop the unknown option or spell it as above",
        )

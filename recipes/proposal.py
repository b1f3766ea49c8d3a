"""A tree change someone already wrote (an agent through ``POST /reef/harness/proposals``,
a person's tool): a recipe that proposes exactly that change, so the engine gates it like
any candidate — static checks, the quality gate held to the proposal's reason, the
evaluation when the scenario has a task set — and, as a proposal, a passing change waits
in the inbox as a pending release for `reef harness promote`.

It is built by the job's flow with the change in hand, never chosen by name: it has no
entry in the recipe registry and learns nothing from traffic."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from recipes.base import Candidate, Change, Context
from recipes.tasks import TaskSet
from reef_cli.core.budget import BudgetLimits
from reef_cli.core.tree import with_changes

NAME = "proposal"


@dataclass
class Proposal:
    """``files``: the changed paths of the served tree, each with its new text (None
    removes it)."""

    files: Mapping[str, str | None]
    reason: str
    name: str = NAME
    trials: bool = False  # no ask to build a probe from: the reason is held by the judge
    requires_tasks: bool = False
    evidence: dict[str, object] = field(default_factory=dict)

    def limits(self, tasks: TaskSet | None) -> BudgetLimits | None:
        return None

    def propose(self, ctx: Context) -> list[Candidate]:
        tree = with_changes(ctx.incumbent, self.files)
        if tree == ctx.incumbent:
            ctx.nothing_new = True  # the served tree already is this
            return []
        changed = sorted(p for p in self.files if self.files[p] != ctx.incumbent.get(p))
        written = [p for p in changed if self.files[p] is not None]
        removed = [p for p in changed if self.files[p] is None]
        # the quality gate reads each change's text: a removed file has none to hold
        changes = [Change.of_path(p, self.reason) for p in written]
        proposal = {"paths": changed, "written": written, "removed": removed, **self.evidence}
        return [
            Candidate(
                files=tree,
                reason=self.reason,
                changes=changes,
                evidence={"proposal": proposal},
            )
        ]

    def revise(self, ctx: Context, candidate: Candidate, reasons: list[str]) -> list[Candidate]:
        return []  # someone else wrote it: a refused proposal is refused, not redrafted

    def settle(self, ctx: Context, state: str) -> None:
        return None

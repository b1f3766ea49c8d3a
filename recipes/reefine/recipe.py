"""The Reefine recipe itself; the package's docstring says how it works."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recipes.base import Candidate, Context
from recipes.reefine import RECIPE, follow
from recipes.reefine.draft import Draft, apply_draft, draft_change
from recipes.reefine.scope import trim_draft
from recipes.tasks import TaskSet
from reef_cli.core.asks import check_ask, clarified
from reef_cli.core.budget import DEFAULT_LIMITS, BudgetLimits
from reef_cli.core.checks import Check
from reef_cli.core.errors import OptionInvalid
from reef_cli.core.llm import ModelClient
from reef_cli.core.tree import HarnessTree, parse_files


def _summary(files: dict[str, str]) -> str:
    try:
        kinds = parse_files(files).summary()
    except Exception:
        return "unknown"
    parts = [f"{kind}: {', '.join(names)}" for kind, names in kinds.items() if names]
    return "; ".join(parts) or "empty"


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip().lstrip("#").strip()
        if len(line) >= 8:
            return line[:80]
    return text.strip()[:80]


def probe_for(draft: Draft, ask: str) -> tuple[str, list[str]]:
    """The trial's prompt and the text its recorded request must hold."""
    if draft.kind == "command":
        return f"/{draft.name}", [_first_line(draft.body)]
    task = (
        f'A developer working with you says: "{ask}". Reply in two sentences: what will you '
        "do, following your instructions?"
    )
    if draft.kind == "skill":
        return task, [draft.name, draft.description[:80]]
    if draft.kind == "extension":
        return task, []
    return task, [_first_line(draft.body)]


TOKENS_PER_CALL = 4000
SECONDS_PER_CALL = 15.0
FOLLOW_CALLS = follow.CALLS + 4  # the follow check's calls, and a few verdict retries


def limits_for(tasks: TaskSet | None) -> BudgetLimits:
    """The defaults plus the follow check's calls; with tasks, plus every test task x
    repeats on both trees, twice over (a run may be retried or judge-scored)."""
    runs = len(tasks.split("test")) * tasks.repeats * 2 if tasks is not None else 0
    calls = (DEFAULT_LIMITS.calls or 0) + FOLLOW_CALLS + 2 * runs
    return BudgetLimits(
        calls=calls,
        tokens=max(DEFAULT_LIMITS.tokens or 0, calls * TOKENS_PER_CALL),
        seconds=max(DEFAULT_LIMITS.seconds or 0.0, calls * SECONDS_PER_CALL),
    )


class Reefine:
    name = RECIPE.name
    trials = True
    requires_tasks = RECIPE.needs_tasks  # one truth: the registered row

    @classmethod
    def with_options(cls, options: Mapping[str, Any] | None = None) -> Reefine:
        if options:
            raise OptionInvalid(
                f"reefine takes no options (got {', '.join(sorted(options))})",
                "drop them, or choose --recipe gepa",
            )
        return cls()

    def limits(self, tasks: TaskSet | None) -> BudgetLimits | None:
        """The defaults fit a draft, a redraft, two judges and a trial; the follow check
        adds its calls, a task set the gate's paired evaluation of its test split, sized
        as GEPA sizes it."""
        return limits_for(tasks)

    def settle(self, ctx: Context, state: str) -> None:
        """Nothing to remember: an ask is consumed by its job."""

    def propose(self, ctx: Context) -> list[Candidate]:
        ask = check_ask(ctx.ask or "")
        if ctx.interactive and ctx.clarify is not None:
            ask = clarified(ask, ctx.clarify)
        ctx.progress(f"drafting a change with {ctx.model.describe()}", 0.15)
        return [self._candidate(ctx, ask)]

    def revise(self, ctx: Context, candidate: Candidate, reasons: list[str]) -> list[Candidate]:
        """One more draft of the same ask, told why the quality gate rejected the last."""
        ask = candidate.reason
        try:
            previous: Draft | None = Draft.model_validate(candidate.evidence.get("draft"))
        except ValueError:
            previous = None
        trimmed = (candidate.evidence.get("scope") or {}).get("trimmed") or []
        if trimmed:  # so the redraft does not add them again
            actions = sorted({a for t in trimmed for a in t["actions"]})
            reasons = [
                f"scope: it added actions the request did not name ({', '.join(actions)}); "
                "leave them out",
                *reasons,
            ]
        ctx.progress("drafting again with the quality gate's reasons", 0.3)
        return [self._candidate(ctx, ask, reasons, previous)]

    def follow(
        self, ctx: Context, candidate: Candidate, judge: ModelClient
    ) -> tuple[Check, dict[str, Any]]:
        """The gate's follow check (``follow.follow_check``): the candidate against the
        served release on check prompts from the ask. Extension code is not text a model
        reads: it is left to a person's review (``pending``), with no call made."""
        draft = Draft.model_validate(candidate.evidence["draft"])
        if draft.kind == "extension":
            detail = "not run: extension code is not text a model reads; a person reviews it"
            return Check("follow", "pending", detail), {"prompts": 0}
        served = f"r{ctx.incumbent_release}" if ctx.incumbent_release else "the empty tree"
        prompts = follow.check_prompts(candidate.reason, draft)
        ctx.progress(f"follow check: {len(prompts)} check prompt(s), {served} vs the change", 0.5)
        return follow.follow_check(
            ctx.model,
            judge,
            candidate.reason,
            ctx.incumbent or HarnessTree().files(),
            candidate.files,
            prompts,
            served_label=served,
        )

    def _candidate(
        self,
        ctx: Context,
        ask: str,
        feedback: list[str] | None = None,
        previous: Draft | None = None,
    ) -> Candidate:
        base = ctx.incumbent or HarnessTree().files()
        drafted = draft_change(ctx.model, ask, _summary(base), feedback=feedback, previous=previous)
        scope = trim_draft(drafted, ask)
        if scope.empty:  # the outcome shows the draft and what was cut from it
            ctx.notes.update(
                {
                    "ask": ask,
                    "draft": drafted.model_dump(),
                    "scope": scope.to_json(),
                    "model": ctx.model.describe(),
                }
            )
            raise scope.refusal()
        draft = scope.draft
        files, change = apply_draft(base, draft)
        if scope.note():
            change.summary += f" ({scope.note()})"
        probe, expect = probe_for(draft, ask)
        return Candidate(
            files=files,
            reason=ask,
            changes=[change],
            probe=probe,
            expect_in_request=expect,
            evidence={"ask": ask, "draft": draft.model_dump(), "scope": scope.to_json()},
        )

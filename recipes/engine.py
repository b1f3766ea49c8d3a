"""The engine every recipe runs under: propose -> gate -> trial -> evaluate -> publish.

A job ends in one of: ``published`` (or ``pending`` when the change is extension code),
``rejected`` (the gate, the trial or the evaluation said no), ``invalid`` (the evaluation
could not be trusted: an evaluator or model outage is never a win), ``stopped`` (a budget
ran out) or ``failed`` (the model or the sandbox could not do the work). Whatever the
end, the chain holds either one complete new release or nothing new.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from recipes.base import Ask, Candidate, Context, Progress, Recipe, no_progress
from recipes.tasks import Task, TaskSet, evaluate
from reef_cli.core import config
from reef_cli.core.budget import BudgetLimits, resolve_limits
from reef_cli.core.errors import ReefError
from reef_cli.core.gate import Check, Verdict
from reef_cli.core.llm import ModelClient
from reef_cli.core.publishing import gate_files, publish_files
from reef_cli.core.scenarios import Scenario
from reef_cli.core.tree import HarnessTree


@dataclass
class Outcome:
    state: str  # published | pending | rejected | invalid | stopped | failed
    message: str
    release: int | None = None
    verdict: dict[str, Any] = field(default_factory=dict)
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "message": self.message,
            "release": self.release,
            "verdict": self.verdict,
            "evidence": self.evidence,
        }


RECIPES = ("reefine",)


def recipe_named(name: str) -> Recipe:
    """The recipe called ``name``; a new recipe registers here and in ``RECIPES``."""
    if name == "reefine":
        from recipes.reefine import Reefine

        return Reefine()
    raise ReefError(f"unknown recipe {name!r}", f"available: {', '.join(RECIPES)}")


class Runner(Protocol):
    """Runs the agent for the gate: a candidate's trial, and one task on one tree.
    ``recipes.trial.AgentRunner`` is the real one; tests may pass their own."""

    def trial(self, candidate: Candidate) -> tuple[Check, dict[str, Any]]: ...

    def score(self, files: dict[str, str], task: Task) -> float | None: ...


@dataclass
class EvolveRequest:
    """Everything one evolution job needs, from the CLI, a `reef serve` job or the live
    loop. ``limits`` are the caller's budget (unset parts: the configured ones, then the
    recipe's, then ``budget.DEFAULT_LIMITS``); ``model`` is a LiteLLM model string
    (None: the configured model, else the embedded one)."""

    scenario: Scenario
    recipe: str = "reefine"
    ask: str | None = None
    adapter: str = "pi"
    limits: BudgetLimits | None = None
    model: str | None = None
    api_base: str | None = None
    tasks: TaskSet | None = None
    interactive: bool = False
    clarify: Ask | None = None
    progress: Progress = no_progress


def evolve(request: EvolveRequest) -> Outcome:
    """The one entry for every evolution: build the model client, the agent runner the
    person chose and the budget, run the recipe and gate its candidate. Never raises a
    ``ReefError``: every end is an ``Outcome``."""
    import adapters
    from recipes.trial import AgentRunner

    try:
        recipe = recipe_named(request.recipe)
        settings = config.load_settings()
        limits = resolve_limits(
            request.limits, getattr(recipe, "budget", None), config.configured_limits(settings)
        )
        model = ModelClient(request.model, api_base=request.api_base, budget=limits.budget())
        adapter = adapters.get(request.adapter)
        with AgentRunner(adapter, request.scenario.name, model) as runner:
            return run(
                request.scenario,
                recipe,
                model=model,
                ask=request.ask,
                interactive=request.interactive,
                clarify=request.clarify,
                progress=request.progress,
                runner=runner,
                tasks=request.tasks,
                extra={"agent": runner.agent},
            )
    except ReefError as exc:  # the runner could not start: no agent, no sandbox …
        return Outcome(exc.kind, exc.one_line())


def run(
    scenario: Scenario,
    recipe: Recipe,
    *,
    model: ModelClient,
    ask: str | None = None,
    interactive: bool = False,
    clarify: Callable[[str], str] | None = None,
    progress: Progress = no_progress,
    runner: Runner | None = None,
    tasks: TaskSet | None = None,
    extra: dict[str, Any] | None = None,
) -> Outcome:
    """Run ``recipe`` and gate its candidate; ``runner=None`` skips trial and evaluation."""
    budget = model.budget
    chain = scenario.chain()
    served = chain.served()
    incumbent = chain.files(served) if served else HarnessTree().files()
    ctx = Context(
        scenario=scenario.name,
        incumbent=incumbent,
        incumbent_release=served.number if served else None,
        model=model,
        budget=budget,
        ask=ask,
        interactive=interactive,
        clarify=clarify,
        progress=progress,
    )
    try:
        progress(f"{recipe.name}: reading the evidence", 0.05)
        candidates = recipe.propose(ctx)
        if not candidates:
            return Outcome("rejected", "the recipe proposed no change")
        return _judge(scenario, recipe, candidates[0], ctx, runner, tasks, extra or {})
    except ReefError as exc:  # the error's class says how the job ends (errors.py)
        return Outcome(exc.kind, exc.one_line(), evidence={"budget": budget.to_json()})


def _judge(
    scenario: Scenario,
    recipe: Recipe,
    candidate: Candidate,
    ctx: Context,
    runner: Runner | None,
    tasks: TaskSet | None,
    extra: dict[str, Any],
) -> Outcome:
    progress, budget, model = ctx.progress, ctx.budget, ctx.model
    progress("gate: validating the tree and scanning for secrets", 0.35)
    # Once per candidate, with the configured limits, before any trial spends budget.
    gated: Verdict = gate_files(candidate.files)
    gated.raise_if_blocked()  # -> GateBlocked: names rule and file:line, never a value
    checks: list[Check] = []
    evidence: dict[str, Any] = {
        **candidate.evidence,
        **extra,
        "changes": [change.__dict__ for change in candidate.changes],
        "model": model.describe(),
    }
    if runner is not None:
        progress("trial: running the agent with the change, in the sandbox", 0.45)
        check, trial_evidence = runner.trial(candidate)
        budget.check_time()
        checks.append(check)
        evidence["trial"] = trial_evidence
        if check.status != "passed":
            return Outcome(
                "rejected",
                f"trial failed: {check.detail}; nothing published",
                verdict={"checks": [check.to_json()]},
                evidence=evidence,
            )
        if tasks is not None:
            result = evaluate(candidate.files, ctx.incumbent, tasks, runner.score, progress)
            checks.append(result.as_check())
            evidence["evaluation"] = result.to_json()
            if result.status != "passed":
                state = "invalid" if result.status == "invalid" else "rejected"
                return Outcome(
                    state,
                    f"evaluation {result.status}: {result.reason}",
                    verdict={"checks": [c.to_json() for c in checks]},
                    evidence=evidence,
                )
    evidence["budget"] = budget.to_json()
    checks.append(
        Check("budget", "passed", f"{budget.calls} model call(s), {budget.tokens} tokens")
    )
    progress("publishing", 0.9)
    release, final = publish_files(
        scenario,
        candidate.files,
        gated=gated,
        reason=candidate.reason,
        source=f"recipe:{recipe.name}",
        recipe=recipe.name,
        extra=evidence,
        extra_checks=checks,
    )
    state = "pending" if release.meta.status == "pending" else "published"
    summary = "; ".join(change.summary for change in candidate.changes)
    return Outcome(state, summary, release.number, final.to_json(), evidence)

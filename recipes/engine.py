"""The engine every recipe runs under: propose -> gate -> trial -> evaluate -> publish.

A job ends in one of: ``published`` (or ``pending`` when the change is extension code),
``rejected`` (the gate or the trial said no; nothing published), ``stopped`` (a budget
ran out) or ``failed`` (the model or the sandbox could not do the work). Whatever the
end, the chain holds either one complete new release or nothing new.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from recipes.base import Candidate, Context, Progress, Recipe, no_progress
from reef_cli.core import scenarios
from reef_cli.core.budget import Budget
from reef_cli.core.errors import BudgetExceeded, ReefError
from reef_cli.core.gate import Check, static_checks
from reef_cli.core.llm import ModelClient
from reef_cli.core.publishing import publish_files
from reef_cli.core.tree import HarnessTree


@dataclass
class Outcome:
    state: str  # published | pending | rejected | stopped | failed
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


def recipe_named(name: str) -> Recipe:
    if name == "reefine":
        from recipes.reefine import Reefine

        return Reefine()
    raise ReefError(f"unknown recipe {name!r}", "available: reefine")


Trial = Callable[[Candidate, str, ModelClient, Budget], tuple[Check, dict[str, Any]]]


def pi_trial(
    candidate: Candidate, scenario: str, model: ModelClient, budget: Budget
) -> tuple[Check, dict[str, Any]]:
    from recipes.trial import TRIAL_TIMEOUT, run_pi_trial, trial_proxy

    remaining = budget.remaining_seconds()
    timeout = TRIAL_TIMEOUT if remaining is None else max(30.0, min(TRIAL_TIMEOUT, remaining))
    with trial_proxy(model, scenario) as proxy:
        result = run_pi_trial(candidate, scenario, proxy, timeout=timeout)
    # The agent's own model calls count against the job's budget too.
    budget.charge(tokens=result.evidence.get("tokens", 0), calls=result.evidence["requests"])
    return result.check, result.evidence


def run(
    scenario_name: str,
    recipe: Recipe,
    *,
    model: ModelClient,
    ask: str | None = None,
    interactive: bool = False,
    clarify: Callable[[str], str] | None = None,
    progress: Progress = no_progress,
    trial: Trial | None = pi_trial,
) -> Outcome:
    budget = model.budget
    scenario = scenarios.get(scenario_name)
    chain = scenario.chain()
    served = chain.served()
    incumbent = chain.files(served) if served else HarnessTree().files()
    ctx = Context(
        scenario=scenario_name,
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
        return _judge(scenario_name, recipe, candidates[0], model, budget, progress, trial)
    except BudgetExceeded as exc:
        return Outcome("stopped", exc.one_line(), evidence={"budget": budget.to_json()})
    except ReefError as exc:
        state = "rejected" if exc.exit_code == 3 else "failed"
        return Outcome(state, exc.one_line(), evidence={"budget": budget.to_json()})


def _judge(
    scenario: str,
    recipe: Recipe,
    candidate: Candidate,
    model: ModelClient,
    budget: Budget,
    progress: Progress,
    trial: Trial | None,
) -> Outcome:
    progress("gate: validating the tree and scanning for secrets", 0.35)
    verdict = static_checks(candidate.files)
    if not verdict.passed:
        verdict.raise_if_blocked()  # -> GateBlocked: names rule and file:line, never a value
    checks: list[Check] = []
    evidence: dict[str, Any] = {
        **candidate.evidence,
        "changes": [change.__dict__ for change in candidate.changes],
        "model": model.describe(),
    }
    if trial is not None:
        progress("trial: running the agent with the change, in the sandbox", 0.5)
        check, trial_evidence = trial(candidate, scenario, model, budget)
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
    evidence["budget"] = budget.to_json()
    checks.append(
        Check("budget", "passed", f"{budget.calls} model call(s), {budget.tokens} tokens")
    )
    progress("publishing", 0.9)
    release, final = publish_files(
        scenario,
        candidate.files,
        reason=candidate.reason,
        source=f"recipe:{recipe.name}",
        recipe=recipe.name,
        extra=evidence,
        extra_checks=checks,
    )
    state = "pending" if release.meta.status == "pending" else "published"
    summary = "; ".join(change.summary for change in candidate.changes)
    return Outcome(state, summary, release.number, final.to_json(), evidence)

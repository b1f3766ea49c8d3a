"""The engine every recipe runs under: propose -> gate -> trial -> evaluate -> publish.

A job ends in one of: ``published`` (or ``pending`` when the change is extension code),
``rejected`` (the gate, the trial or the evaluation said no), ``invalid`` (the evaluation
could not be trusted: an evaluator or model outage is never a win), ``stopped`` (a budget
ran out) or ``failed`` (the model or the sandbox could not do the work). Whatever the
end, the chain holds either one complete new release or nothing new.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Protocol

from recipes.base import Candidate, Context, Progress, Recipe, no_progress
from recipes.tasks import Task, TaskSet
from reef_cli.core import scenarios
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


class Runner(Protocol):
    """Runs the agent for the gate: a candidate's trial, and one task on one tree."""

    def trial(self, candidate: Candidate) -> tuple[Check, dict[str, Any]]: ...

    def score(self, files: dict[str, str], task: Task) -> float | None: ...


class PiRunner:
    """The real agent: pi in the sandbox, through a private recording proxy to the model.
    Every model call the agent makes is charged to the job's budget."""

    def __init__(self, scenario: str, model: ModelClient) -> None:
        self.scenario = scenario
        self.model = model
        self._stack = ExitStack()
        self.proxy: Any = None

    def __enter__(self) -> PiRunner:
        from recipes.trial import trial_proxy

        self.proxy = self._stack.enter_context(trial_proxy(self.model, self.scenario))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _timeout(self) -> float:
        from recipes.trial import TRIAL_TIMEOUT

        remaining = self.model.budget.remaining_seconds()
        return TRIAL_TIMEOUT if remaining is None else max(30.0, min(TRIAL_TIMEOUT, remaining))

    def _charge(self, records: list[Any]) -> None:
        from recipes.trial import tokens_of

        self.model.budget.charge(tokens=tokens_of(records), calls=len(records))

    def trial(self, candidate: Candidate) -> tuple[Check, dict[str, Any]]:
        from recipes.trial import run_pi_trial

        result = run_pi_trial(candidate, self.scenario, self.proxy, timeout=self._timeout())
        self.model.budget.charge(
            tokens=result.evidence.get("tokens", 0), calls=result.evidence["requests"]
        )
        return result.check, result.evidence

    def score(self, files: dict[str, str], task: Task) -> float | None:
        from recipes.tasks import score_answer
        from recipes.trial import run_pi

        self.model.budget.check_time()
        run = run_pi(files, task.prompt, self.scenario, self.proxy, self._timeout())
        self._charge(run.records)
        if not run.ok or not run.records:
            return None
        return score_answer(run.stdout, task)


def run(
    scenario_name: str,
    recipe: Recipe,
    *,
    model: ModelClient,
    ask: str | None = None,
    interactive: bool = False,
    clarify: Callable[[str], str] | None = None,
    progress: Progress = no_progress,
    runner: Runner | None = None,
    tasks: TaskSet | None = None,
) -> Outcome:
    """Run ``recipe`` and gate its candidate; ``runner=None`` skips trial and evaluation."""
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
        return _judge(scenario_name, recipe, candidates[0], ctx, runner, tasks)
    except BudgetExceeded as exc:
        return Outcome("stopped", exc.one_line(), evidence={"budget": budget.to_json()})
    except ReefError as exc:
        state = "rejected" if exc.exit_code == 3 else "failed"
        return Outcome(state, exc.one_line(), evidence={"budget": budget.to_json()})


def _judge(
    scenario: str,
    recipe: Recipe,
    candidate: Candidate,
    ctx: Context,
    runner: Runner | None,
    tasks: TaskSet | None,
) -> Outcome:
    progress, budget, model = ctx.progress, ctx.budget, ctx.model
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
            from recipes.tasks import evaluate

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
        reason=candidate.reason,
        source=f"recipe:{recipe.name}",
        recipe=recipe.name,
        extra=evidence,
        extra_checks=checks,
    )
    state = "pending" if release.meta.status == "pending" else "published"
    summary = "; ".join(change.summary for change in candidate.changes)
    return Outcome(state, summary, release.number, final.to_json(), evidence)

"""The gate: the one place that decides whether a candidate becomes a release.

``decide`` is its entry for a harness candidate; every step below runs in this order and
the first that fails ends the job (``Outcome``), with every check kept in the verdict:

1. static checks (``reef_cli.core.checks.static_checks`` through
   ``publishing.gate_files``): tree rules, the credential scan, the policy scan — the
   part every publish runs, a hand publish too, so it lives in core;
2. quality (``recipes.quality``, shared with the recipes and the task scorers' judge):
   deterministic checks on the text the model wrote, then the judge; a failing
   candidate is proposed once more with the reasons (``revise``);
3. the trial (``trial.py``): the agent in the sandbox with the change, and its answer
   held to the ask; a recipe's ``follow`` (Reefine: is the change followed?);
4. paired evaluation on held-out tasks (``recipes.tasks.evaluation``), decided by
   ``reef_cli.core.paired_rule.decide`` (sign test or bootstrap, vetoes);
5. the budget, then publish (or hold as a proposal for review).

A judge that gives no valid answer ends the job ``invalid``: an outage is never a pass.

Weights go through the same paired rule: ``evaluate_weights`` (reefd's entry) has both
sides answer every task of the task set's held-out ``test`` split ``repeats`` times,
``recipes.tasks.scoring.grade`` scores the answers, and ``decide`` gives the verdict. An
answer of ``None`` — or a Reef error while answering — is an outage: the run is
``invalid``, never a win, and the runs still to come are skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from recipes import quality
from recipes.base import Candidate, Context, Progress, Recipe
from recipes.tasks import TaskRunner, TaskSet, evaluate
from recipes.tasks.evaluation import Scores, run_side
from recipes.tasks.model import Split, Task
from recipes.tasks.runners import parallelism
from recipes.tasks.scoring import TaskRun, grade
from reef_cli.core import paired_rule
from reef_cli.core.checks import Check, Verdict
from reef_cli.core.errors import ReefError
from reef_cli.core.llm import ModelClient
from reef_cli.core.publishing import gate_files, publish_files
from reef_cli.core.scenarios import Scenario

if TYPE_CHECKING:
    from recipes.engine import Runner


@dataclass
class Outcome:
    state: str  # published | pending | unchanged | rejected | invalid | stopped | failed
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


@dataclass
class Gated:
    """How a candidate is judged: its trial, its tasks and where it is published."""

    runner: Runner | None
    task_runner: TaskRunner | None
    held_out: TaskSet | None
    extra: dict[str, Any]
    gate: QualityGate
    publish: Literal["auto", "review"] = "auto"
    split: str = "test"  # test: the task set's held-out split; replay: the recipe's own


@dataclass
class QualityGate:
    """The quality checks on model-written text and on the trial's answer."""

    judge: ModelClient
    threshold: float

    def draft(self, candidate: Candidate, ask: str | None = None) -> list[Check]:
        """Deterministic checks on every changed file's text; the judge when they pass.
        With no ask (a search recipe such as GEPA) only the ask-free checks run — no
        debris, no template junk — and the held-out evaluation is the judge."""
        if ask is None:
            return self._unasked(candidate)
        ask = candidate.reason
        checks: list[Check] = []
        texts: list[quality.Written] = []
        for change in candidate.changes:
            if change.path not in candidate.files:
                continue  # a removal: no text was written
            text = quality.written_of(
                candidate.files, change.kind, change.name, change.path, change.why
            )
            texts.append(text)
            checks += quality.check_written(ask, text)
        if texts and not quality.failures(checks):
            shown = "\n\n".join(
                f"Kind: {t.kind} {t.name}\nDescription: {t.description}\n{t.body}" for t in texts
            )
            checks.append(
                quality.judge(
                    self.judge,
                    ask,
                    f"The change ({len(texts)} file(s)):",
                    shown,
                    name="judge-draft",
                    threshold=self.threshold,
                )
            )
        return checks

    def _unasked(self, candidate: Candidate) -> list[Check]:
        checks: list[Check] = []
        for change in candidate.changes:
            if change.path not in candidate.files:
                continue
            text = quality.written_of(
                candidate.files, change.kind, change.name, change.path, change.why
            )
            junk = quality.debris_in(text.body, "", code=change.kind == "extension")
            checks.append(
                Check(
                    "quality-debris",
                    "failed" if junk else "passed",
                    f"{change.path}: " + ("; ".join(junk) or "0 found"),
                )
            )
        return checks

    def answer(self, candidate: Candidate, trial: dict[str, Any]) -> list[Check]:
        """The trial's answer follows the ask: the deterministic minimum, then the judge."""
        answer = str(trial.get("answer_excerpt") or trial.get("answer") or "")
        probe = candidate.probe or ""
        checks = [quality.check_answer(candidate.reason, answer, probe)]
        if checks[0].status == "passed":
            checks.append(
                quality.judge(
                    self.judge,
                    candidate.reason,
                    f"The agent's answer to {probe[:300]!r}, with the change installed:",
                    answer,
                    name="judge-answer",
                    threshold=self.threshold,
                )
            )
        return checks


def _stop_on(
    checks: list[Check], what: str, evidence: dict[str, Any], verdict: list[Check]
) -> Outcome | None:
    """The job's end when ``checks`` did not all pass: ``invalid`` if a judge gave no
    verdict, else ``rejected`` with the reasons; None when they passed."""
    invalid = [c for c in checks if c.status == "invalid"]
    reasons = quality.failures(checks)
    if not reasons:
        return None
    state = "invalid" if invalid else "rejected"
    return Outcome(
        state,
        f"{what}: {'; '.join(reasons[:3])}; nothing published",
        verdict={"checks": [c.to_json() for c in verdict]},
        evidence=evidence,
    )


def decide(
    scenario: Scenario, recipe: Recipe, candidate: Candidate, ctx: Context, how: Gated
) -> Outcome:
    progress, budget, model = ctx.progress, ctx.budget, ctx.model
    runner, task_runner, held_out, extra, gate = (
        how.runner,
        how.task_runner,
        how.held_out,
        how.extra,
        how.gate,
    )
    progress("gate: validating the tree and scanning for secrets", 0.35)
    # Once per candidate, with the configured limits, before any trial spends budget.
    gated: Verdict = gate_files(candidate.files)
    gated.raise_if_blocked()  # -> GateBlocked: names rule and file:line, never a value
    progress("gate: checking the text the model wrote", 0.4)
    checks = gate.draft(candidate, ctx.ask)
    attempts = [[c.to_json() for c in checks]]
    judged_out = any(c.status == "invalid" for c in checks)  # an outage is not redrafted
    if quality.failures(checks) and not judged_out:
        revised = recipe.revise(ctx, candidate, quality.failures(checks))
        if revised:
            candidate = revised[0]
            gated = gate_files(candidate.files)
            gated.raise_if_blocked()
            checks = gate.draft(candidate, ctx.ask)
            attempts.append([c.to_json() for c in checks])
    evidence: dict[str, Any] = {
        **candidate.evidence,
        **ctx.notes,
        **extra,
        "changes": [change.__dict__ for change in candidate.changes],
        "model": model.describe(),
        "judge": {"model": gate.judge.describe(), "threshold": gate.threshold},
        "quality": {"drafts": len(attempts), "attempts": attempts},
    }
    drafts = "1 draft" if len(attempts) == 1 else f"{len(attempts)} drafts"
    stopped = _stop_on(
        checks, f"the quality gate rejected the change ({drafts})", evidence, gated.checks + checks
    )
    if stopped is not None:
        evidence["budget"] = budget.to_json()
        return stopped
    if runner is not None:
        ended = _trial(candidate, runner, gate, progress, budget, evidence, gated, checks)
        if ended is not None:
            return ended
    follow = getattr(recipe, "follow", None)  # Reefine: is the change followed? (optional)
    if follow is not None:
        check, evidence["follow"] = follow(ctx, candidate, gate.judge)
        checks.append(check)
        stopped = _stop_on([check], "the change is not followed", evidence, gated.checks + checks)
        if stopped is not None:
            evidence["budget"] = budget.to_json()
            return stopped
    if held_out is not None and task_runner is not None:
        progress(f"evaluation: {len(held_out.tasks)} held-out task(s), both trees", 0.55)
        result = evaluate(
            candidate.files,
            ctx.incumbent,
            held_out,
            task_runner.run_task,
            progress,
            incumbent_release=ctx.incumbent_release,
            workers=parallelism(task_runner),
        )
        checks.append(result.as_check())
        evidence["evaluation"] = {**result.to_json(), "split": how.split}
        if result.status != "passed":
            state = "invalid" if result.status == "invalid" else "rejected"
            evidence["budget"] = budget.to_json()
            return Outcome(
                state,
                f"evaluation {result.status}: {result.reason}",
                verdict={"checks": [c.to_json() for c in gated.checks + checks]},
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
        hold="review" if how.publish == "review" else None,
    )
    state = "pending" if release.meta.status == "pending" else "published"
    summary = "; ".join(change.summary for change in candidate.changes)
    return Outcome(state, summary, release.number, final.to_json(), evidence)


def _trial(
    candidate: Candidate,
    runner: Runner,
    gate: QualityGate,
    progress: Progress,
    budget: Any,
    evidence: dict[str, Any],
    gated: Verdict,
    checks: list[Check],
) -> Outcome | None:
    """The agent's trial and its answer's checks; the job's end if they did not pass."""
    progress("trial: running the agent with the change, in the sandbox", 0.45)
    check, trial_evidence = runner.trial(candidate)
    budget.check_time()
    checks.append(check)
    evidence["trial"] = trial_evidence
    if check.status != "passed":
        return Outcome(
            "rejected",
            f"trial failed: {check.detail}; nothing published",
            verdict={"checks": [c.to_json() for c in gated.checks + checks]},
            evidence=evidence,
        )
    progress("trial: does the answer follow the ask?", 0.5)
    answered = gate.answer(candidate, trial_evidence)
    checks += answered
    stopped = _stop_on(
        answered,
        "trial failed: the change loaded but the answer does not follow the ask",
        evidence,
        gated.checks + checks,
    )
    if stopped is not None:
        evidence["budget"] = budget.to_json()
    return stopped


Answer = Callable[[Task], str | None]  # None: an outage (engine down, generation failed)
SPLIT: Split = "test"


def evaluate_weights(
    candidate: Answer,
    served: Answer,
    tasks: TaskSet,
    *,
    judge: ModelClient | None = None,
    progress: Progress | None = None,
) -> paired_rule.Outcome:
    """``paired_rule.decide``'s verdict on candidate vs served answers over the test split."""
    test = tasks.split(SPLIT)
    if not test:
        return paired_rule.Outcome(
            "invalid",
            f"the task set has no {SPLIT} tasks, so the weights cannot be judged",
            {"split": SPLIT, "tasks": 0},
        )
    total = len(test) * tasks.repeats * 2
    done = [0]
    outage: list[str] = []

    def runner(side: str) -> Callable[[Answer, Task], TaskRun]:
        def run(answer: Answer, task: Task) -> TaskRun:
            if progress is not None:
                progress(f"weight gate: {task.id} ({side})", done[0] / total)
            done[0] += 1
            if outage:
                return TaskRun(None, "", "skipped: an earlier run had an outage")
            try:
                text = answer(task)
            except ReefError as exc:
                text = None
                outage.append(f"{side} {task.id}: {exc.message}")
            else:
                if text is None:
                    outage.append(f"{side} {task.id}: no answer")
            return grade(task, text, judge=judge)

        return run

    cand, cand_lenient = run_side(candidate, test, tasks.repeats, runner("candidate"))
    inc, inc_lenient = run_side(served, test, tasks.repeats, runner("served"))
    lenient: tuple[Scores, Scores] | None = (cand_lenient, inc_lenient) if cand_lenient else None
    outcome = paired_rule.decide(cand, inc, tasks.policy(), lenient=lenient)
    outcome.numbers["split"] = SPLIT
    if outage:  # decide() says invalid; name the outage, not the runs skipped after it
        outcome.numbers["outage"] = outage[0]
        outcome.reason = f"an outage makes the evaluation invalid: {outage[0]}"
    if progress is not None:
        progress(f"weight gate: {outcome.status}", 1.0)
    return outcome


def gate_record(outcome: paired_rule.Outcome) -> dict[str, Any]:
    """What a weight release's ``RELEASE.json`` keeps of the gate (``gate``): the verdict,
    why, every number, and the check in the harness gate's shape."""
    return {
        "verdict": outcome.status,
        "reason": outcome.reason,
        "numbers": outcome.numbers,
        "checks": [outcome.as_check().to_json()],
    }

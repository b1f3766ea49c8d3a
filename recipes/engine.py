"""The engine every recipe runs under: propose -> gate -> trial -> evaluate -> publish.

A job ends in one of: ``published`` (or ``pending`` when the change is extension code or
waits for a person's review), ``unchanged`` (the recipe found no new evidence, or kept
it for a later run: exit 0), ``rejected`` (the gate, the trial or the evaluation said
no), ``invalid`` (the evaluation could not be trusted: an evaluator or model outage is
never a win), ``stopped`` (a budget ran out) or ``failed`` (the model or the sandbox
could not do the work). Whatever the end, the chain holds either one complete new
release or nothing new.

The quality gate (``reef_cli.core.quality``) runs here for every recipe, on the text its
candidate's changes hold: the deterministic checks, then — when they pass — the judge, all
before the trial. A candidate that fails is proposed once more with the reasons as
feedback when the recipe has ``revise(ctx, candidate, reasons) -> [Candidate]``; if that
fails too the job ends ``rejected``. After the trial the agent's answer is held to the
ask the same way (a deterministic minimum, then the judge). A recipe with
``follow(ctx, candidate, judge) -> (Check, evidence)`` (Reefine) is then asked whether
its change is followed, not only loaded; a ``follow`` check that does not pass ends the
job before the evaluation. A judge that gives no valid answer ends the job ``invalid``:
an outage is never a pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from recipes.base import Ask, Candidate, Context, Progress, Recipe, RunTask, no_progress
from recipes.tasks import DIRECT, DirectRunner, Task, TaskRun, TaskRunner, TaskSet, evaluate
from recipes.tasks.runners import ANSWER_TOKENS, parallelism
from reef_cli.core import config, plugins, quality
from reef_cli.core.budget import DEFAULT_LIMITS, BudgetLimits, resolve_limits
from reef_cli.core.config import Settings
from reef_cli.core.errors import BudgetInvalid, ReefError, TaskSetError
from reef_cli.core.evaluation import sign_test_minimum
from reef_cli.core.gate import Check, Verdict
from reef_cli.core.llm import ModelClient
from reef_cli.core.publishing import gate_files, publish_files
from reef_cli.core.scenarios import Scenario
from reef_cli.core.tree import HarnessTree


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


def recipe_named(name: str, options: dict[str, Any] | None = None) -> Recipe:
    """The recipe called ``name`` (a ``reef.recipes`` entry point, ``core.plugins``),
    built with its ``options`` (e.g. GEPA's ``max_metric_calls``)."""
    factory = plugins.load(plugins.recipe(name).factory)
    recipe: Recipe = factory.with_options(options or {})
    return recipe


class Runner(Protocol):
    """Runs the agent for the gate: a candidate's trial, and one task on one tree.
    ``recipes.trial.AgentRunner`` is the real one; tests may pass their own."""

    def trial(self, candidate: Candidate) -> tuple[Check, dict[str, Any]]: ...

    def run_task(self, files: dict[str, str], task: Task) -> TaskRun: ...


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
    recipe_options: dict[str, Any] = field(default_factory=dict)
    publish: Literal["auto", "review"] = "auto"  # review: a passing candidate waits as pending
    interactive: bool = False
    clarify: Ask | None = None
    progress: Progress = no_progress
    cache: bool = True  # reuse the embedded model's stored greedy answers (answer_cache)


def evolve(request: EvolveRequest) -> Outcome:
    """The one entry for every evolution: build the model client, the runners the person
    and the task set chose and the budget, run the recipe and gate its candidate. Never
    raises a ``ReefError``: every end is an ``Outcome``."""
    try:
        recipe = recipe_named(request.recipe, request.recipe_options)
        check_tasks(recipe, request.tasks)
        settings = config.load_settings()
        own = recipe.limits(request.tasks)
        limits = resolve_limits(request.limits, own, config.configured_limits(settings))
        check_budget(limits, request.tasks, own)
        model = ModelClient(
            request.model,
            api_base=request.api_base,
            budget=limits.budget(),
            cache=request.cache,
        )
        judge = judge_client(settings, model)
        with runners(
            request.scenario.name, request.adapter, request.tasks, model, judge, recipe.trials
        ) as (trial_runner, task_runner, extra):
            outcome = run(
                request.scenario,
                recipe,
                model=model,
                ask=request.ask,
                interactive=request.interactive,
                clarify=request.clarify,
                progress=request.progress,
                runner=trial_runner,
                task_runner=task_runner,
                tasks=request.tasks,
                extra=extra,
                judge=judge,
                judge_threshold=settings.judge_threshold,
                publish=request.publish,
            )
        reused = model.reused + (judge.reused if judge is not model else 0)
        if reused:  # answers the embedded model gave before, taken from the answer cache
            outcome.evidence["answers_reused"] = reused
        return outcome
    except ReefError as exc:  # the runner could not start: no agent, no sandbox …
        return Outcome(exc.kind, exc.one_line())


@contextmanager
def runners(
    scenario: str,
    adapter: str,
    tasks: TaskSet | None,
    model: ModelClient,
    judge: ModelClient,
    trials: bool,
) -> Iterator[tuple[Runner | None, TaskRunner | None, dict[str, Any]]]:
    """(trial runner, task runner, evidence) for one job, and the gate's evaluation.

    The agent (``adapter``) runs a candidate's trial when ``trials`` (Reefine) and the
    tasks when the task set names no other runner; ``runner: direct`` answers each task
    with one model call and needs no agent (nor a sandbox) unless a trial does."""
    import adapters
    from recipes.trial import AgentRunner

    task_runner_name = (tasks.runner if tasks else None) or adapter
    direct = DirectRunner(
        model,
        harness_in=tasks.harness_in if tasks else "system",
        judge=judge,
        max_tokens=(tasks.answer_tokens if tasks else None) or ANSWER_TOKENS,
    )
    extra: dict[str, Any] = {}
    if tasks is not None:
        extra["tasks"] = _describe_tasks(tasks, task_runner_name, direct)
    if not trials and (task_runner_name == DIRECT or tasks is None):
        yield None, direct, extra  # a recipe's own replay tasks run directly too
        return
    agent_name = task_runner_name if task_runner_name != DIRECT else adapter
    with AgentRunner(adapters.get(agent_name), scenario, model) as agent:
        task_runner: TaskRunner = direct if task_runner_name == DIRECT else agent
        yield (agent if trials else None), task_runner, {"agent": agent.agent, **extra}


def check_tasks(recipe: Recipe, tasks: TaskSet | None) -> None:
    """Refuse, before any model loads, a task set the recipe cannot use."""
    if recipe.requires_tasks:
        _check_splits(recipe, tasks)
    check_decidable(tasks)


def _check_splits(recipe: Recipe, tasks: TaskSet | None) -> None:
    hint = (
        "pass --tasks FILE with train, val and test tasks (make one: reef tasks make "
        "reasoning-gym -o tasks.yaml)"
    )
    if tasks is None:
        raise TaskSetError(f"{recipe.name} searches against scored tasks and has none", hint)
    counts = tasks.counts()
    empty = [split for split, n in counts.items() if n == 0]
    if empty:
        raise TaskSetError(
            f"{recipe.name} needs train, val and test tasks; this set has no "
            f"{' or '.join(empty)} tasks ({counts})",
            hint,
        )


def check_decidable(tasks: TaskSet | None) -> None:
    """Refuse a test split too small for the sign test ever to pass (n wins and no loss
    give p = 2**-n): the job would spend its whole budget and could never publish."""
    if tasks is None or tasks.method != "sign":
        return
    held_out = len(tasks.split("test"))
    needed = sign_test_minimum(tasks.alpha)
    if 0 < held_out < needed:
        raise TaskSetError(
            f"the task set has {held_out} test task(s); the sign test at alpha {tasks.alpha:g} "
            f"needs at least {needed} to ever pass, so nothing could be published",
            f"add test tasks (at least {needed}), or set `method: bootstrap` in the task set",
        )


def check_budget(limits: BudgetLimits, tasks: TaskSet | None, own: BudgetLimits | None) -> None:
    """Refuse, before any model loads, a call budget too small for the gate's paired
    evaluation alone (every test task x repeats, on both trees): it could only run out at
    the end, with nothing published."""
    if tasks is None or limits.calls is None:
        return
    test = tasks.split("test")
    runs = len(test) * tasks.repeats * 2
    if limits.calls >= runs:
        return
    enough = max(
        own.calls if own is not None and own.calls else 0, runs + (DEFAULT_LIMITS.calls or 0)
    )
    raise BudgetInvalid(
        f"a budget of {limits.calls} model calls cannot cover the evaluation: {len(test)} test "
        f"task(s) x {tasks.repeats} repeat(s) on both trees take {runs} calls",
        f"raise --max-calls (or `reef config set max_calls`) to at least {enough}",
    )


def _describe_tasks(tasks: TaskSet, runner: str, direct: DirectRunner) -> dict[str, Any]:
    """The task set as release evidence: name, provenance, split sizes, runner."""
    out: dict[str, Any] = {
        "name": tasks.name,
        "source": tasks.source,
        "splits": tasks.counts(),
        "repeats": tasks.repeats,
        "method": tasks.method,
        "runner": runner,
    }
    if runner == DIRECT:
        out["harness_in"] = direct.harness_in
    return out


def search_only(run_task: RunTask) -> RunTask:
    """``run_task`` for a recipe: the test split is the gate's, so a recipe that asks for
    a test task is refused (a recipe bug, never a silent leak)."""

    def guarded(files: dict[str, str], task: Task) -> TaskRun:
        if task.split == "test":
            raise ReefError(
                f"a recipe asked to run test task {task.id!r}; the test split is held out"
            )
        return run_task(files, task)

    return guarded


def judge_client(settings: Settings, model: ModelClient) -> ModelClient:
    """The judge: a configured stronger model (``judge_model`` / ``judge_api_base``) or
    the job's own model; its calls charge the job's budget."""
    name = settings.judge_model
    if not name:
        return model
    return ModelClient(
        name, api_base=settings.judge_api_base, budget=model.budget, cache=model.cache
    )


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
    task_runner: TaskRunner | None = None,
    tasks: TaskSet | None = None,
    extra: dict[str, Any] | None = None,
    judge: ModelClient | None = None,
    judge_threshold: float | None = None,
    publish: Literal["auto", "review"] = "auto",
) -> Outcome:
    """Run ``recipe`` and gate its candidate. ``runner`` runs a candidate's trial (None:
    no trial); ``task_runner`` (default: ``runner``) answers tasks: the recipe's search on
    the train/val splits and the gate's evaluation on the test split (None: no
    evaluation, unless the candidate brings replay tasks, which run directly). ``judge``
    scores model-written text and the trial's answer (default: ``model``) and passes at
    ``judge_threshold`` (default ``quality.DEFAULT_THRESHOLD``). ``publish="review"``
    holds a passing candidate as a pending release (a proposal) until `reef harness
    promote N`. The recipe's ``settle`` hears how the job ended."""
    budget = model.budget
    chain = scenario.chain()
    served = chain.served()
    incumbent = chain.files(served) if served else HarnessTree().files()
    task_runner = task_runner or runner
    held_out = tasks.only("test") if tasks is not None else None
    search = tasks.only("train", "val") if tasks is not None else None
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
        tasks=search,
        run_task=search_only(task_runner.run_task) if task_runner is not None else None,
        held_out=len(held_out.tasks) if held_out is not None else None,
    )
    gate = QualityGate(
        judge or model,
        quality.DEFAULT_THRESHOLD if judge_threshold is None else judge_threshold,
    )
    try:
        check_tasks(recipe, tasks)
        progress(f"{recipe.name}: reading the evidence", 0.05)
        candidates = recipe.propose(ctx)
        if not candidates:
            state, why = (
                ("unchanged", ctx.held_back or "nothing new to learn from")
                if ctx.nothing_new or ctx.held_back
                else ("rejected", "the recipe proposed no change")
            )
            outcome = Outcome(state, why, evidence={"budget": budget.to_json(), **ctx.notes})
        else:
            candidate = candidates[0]
            split = "test"
            if held_out is None and candidate.tasks is not None:
                held_out, split = candidate.tasks, "replay"  # the recipe's replay tasks
                task_runner = DirectRunner(
                    model,
                    harness_in=held_out.harness_in,
                    judge=gate.judge,
                    max_tokens=held_out.answer_tokens or ANSWER_TOKENS,
                )
            outcome = _judge(
                scenario,
                recipe,
                candidate,
                ctx,
                Gated(runner, task_runner, held_out, extra or {}, gate, publish, split),
            )
    except ReefError as exc:  # the error's class says how the job ends (errors.py)
        outcome = Outcome(
            exc.kind, exc.one_line(), evidence={"budget": budget.to_json(), **ctx.notes}
        )
    try:
        recipe.settle(ctx, outcome.state)
    except ReefError as exc:  # e.g. the mark could not be written: say so, keep the end
        outcome.message += f" (the recipe could not record it: {exc.one_line()})"
    return outcome


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


def _judge(
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

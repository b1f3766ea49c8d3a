"""The engine every recipe runs under: propose -> gate -> trial -> evaluate -> publish.

A job ends in one of: ``published`` (or ``pending`` when the change is extension code or
waits for a person's review), ``unchanged`` (the recipe found no new evidence, or kept
it for a later run: exit 0), ``rejected`` (the gate, the trial or the evaluation said
no), ``invalid`` (the evaluation could not be trusted: an evaluator or model outage is
never a win), ``stopped`` (a budget ran out) or ``failed`` (the model or the sandbox
could not do the work). Whatever the end, the chain holds either one complete new
release or nothing new.

The gate (``gate.py``, entry ``gate.decide``) judges the candidate: static checks,
quality, the trial, paired evaluation, then publish. This package is everything that runs
a recipe and is not one: this module (the evolve path: the job's model client, budget and
runners), ``gate.py`` (with ``recipes.quality``), ``trial.py`` (the agent in the sandbox)
and ``worker.py`` (``reef serve``'s job worker, one child process per job).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from recipes import quality
from recipes.base import (
    AgentSession,
    Ask,
    Candidate,
    Context,
    Progress,
    Recipe,
    RunTask,
    drives_agent,
    no_progress,
)
from recipes.engine.gate import Gated, Outcome, QualityGate, decide
from recipes.tasks import DIRECT, DirectRunner, Task, TaskRun, TaskRunner, TaskSet
from recipes.tasks.runners import ANSWER_TOKENS, parallelism
from reef_cli.core import config, plugins
from reef_cli.core.budget import DEFAULT_LIMITS, BudgetLimits, resolve_limits
from reef_cli.core.checks import Check
from reef_cli.core.config import Settings
from reef_cli.core.errors import BudgetInvalid, ReefError, TaskSetError
from reef_cli.core.llm import ModelClient
from reef_cli.core.paired_rule import sign_test_minimum
from reef_cli.core.scenarios import Scenario
from reef_cli.core.tree import HarnessTree


def recipe_named(name: str, options: dict[str, Any] | None = None) -> Recipe:
    """The recipe called ``name`` (a ``reef.recipes`` entry point, ``core.plugins``),
    built with its ``options`` (e.g. GEPA's ``max_metric_calls``)."""
    factory = plugins.load(plugins.recipe(name).factory)
    recipe: Recipe = factory.with_options(options or {})
    return recipe


class Runner(Protocol):
    """Runs the agent for the gate: a candidate's trial, and one task on one tree.
    ``recipes.engine.trial.AgentRunner`` is the real one; tests may pass their own."""

    def trial(self, candidate: Candidate) -> tuple[Check, dict[str, Any]]: ...

    def run_task(self, files: dict[str, str], task: Task) -> TaskRun: ...


@dataclass
class EvolveRequest:
    """Everything one evolution job needs, from the CLI, a `reef serve` job or the live
    loop. ``limits`` are the caller's budget (unset parts: the configured ones, then the
    recipe's, then ``budget.DEFAULT_LIMITS``); ``model`` is a LiteLLM model string
    (None: the configured model, else the embedded one)."""

    scenario: Scenario
    recipe: str | Recipe = "reefine"  # a registered name, or one the flow built (a proposal)
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
        recipe = (
            recipe_named(request.recipe, request.recipe_options)
            if isinstance(request.recipe, str)
            else request.recipe
        )
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
            request.scenario.name,
            request.adapter,
            request.tasks,
            model,
            judge,
            recipe.trials,
            drives_agent(recipe),
        ) as (trial_runner, task_runner, extra, agent):
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
                agent=agent,
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
    own_agent: bool = False,
) -> Iterator[tuple[Runner | None, TaskRunner | None, dict[str, Any], AgentSession | None]]:
    """(trial runner, task runner, evidence, the recipe's agent) for one job, and the
    gate's evaluation.

    The agent (``adapter``) runs a candidate's trial when ``trials`` (Reefine), the
    tasks when the task set names no other runner, and the recipe's own runs when it
    needs its ``own_agent`` (Meta-Harness's proposer); ``runner: direct`` answers each task
    with one model call and needs no agent (nor a sandbox) unless one of those does."""
    import adapters
    from recipes.engine.trial import AgentRunner

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
    if not (trials or own_agent) and (task_runner_name == DIRECT or tasks is None):
        yield None, direct, extra, None  # a recipe's own replay tasks run directly too
        return
    agent_name = task_runner_name if task_runner_name != DIRECT else adapter
    with AgentRunner(adapters.get(agent_name), scenario, model) as agent:
        task_runner: TaskRunner = direct if task_runner_name == DIRECT else agent
        yield (
            agent if trials else None,
            task_runner,
            {"agent": agent.agent, **extra},
            agent if own_agent else None,
        )


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
    agent: AgentSession | None = None,
    tasks: TaskSet | None = None,
    extra: dict[str, Any] | None = None,
    judge: ModelClient | None = None,
    judge_threshold: float | None = None,
    publish: Literal["auto", "review"] = "auto",
) -> Outcome:
    """Run ``recipe`` and gate its candidate. ``runner`` runs a candidate's trial (None:
    no trial); ``task_runner`` (default: ``runner``) answers tasks: the recipe's search on
    the train/val splits and the gate's evaluation on the test split (None: no
    evaluation, unless the candidate brings replay tasks, which run directly); ``agent``
    is the recipe's own (``Context.agent``) when it ``drives_agent``. ``judge``
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
        parallelism=parallelism(task_runner) if task_runner is not None else 1,
        agent=agent,
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
            outcome = decide(
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

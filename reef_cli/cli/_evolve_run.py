"""The work behind `reef evolve` / `reef quickstart`: an ``EvolveRequest`` handed to the
engine, with a rich progress display, then the outcome printed."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from recipes import engine, tasks
from reef_cli.core.budget import BudgetLimits
from reef_cli.core.scenarios import Scenario


def run_foreground(
    scenario: Scenario,
    *,
    ask: str | None,
    recipe: str,
    adapter: str = "pi",
    interactive: bool,
    model: str | None,
    limits: BudgetLimits | None = None,
    as_json: bool = False,
    tasks_file: Path | None = None,
    recipe_options: dict[str, Any] | None = None,
    explain: Callable[[engine.Outcome], bool] | None = None,
    cache: bool = True,
) -> engine.Outcome:
    """``explain``: prints an end its own way (True) instead of the outcome line."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from reef_cli.cli._output import err_console, markup, print_json

    task_set = tasks.for_scenario(scenario, tasks_file)
    interactive = interactive and sys.stdin.isatty()

    def clarify(question: str) -> str:
        import typer

        return str(typer.prompt(question, default="", show_default=False))

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=err_console(),
        transient=not sys.stderr.isatty(),
        disable=as_json,
    ) as bar:
        task = bar.add_task(f"{recipe} on {scenario.name}", total=1.0)

        def progress(message: str, fraction: float | None = None) -> None:
            bar.update(  # the description is rich markup; a message quotes a model
                task,
                description=markup(message),
                completed=fraction if fraction is not None else bar.tasks[0].completed,
            )
            if not sys.stderr.isatty() and not as_json:
                err_console().print(f"  … {markup(message)}")

        outcome = engine.evolve(
            engine.EvolveRequest(
                scenario=scenario,
                recipe=recipe,
                ask=ask,
                adapter=adapter,
                limits=limits,
                model=model,
                tasks=task_set,
                recipe_options=recipe_options or {},
                interactive=interactive,
                clarify=clarify,
                progress=progress,
                cache=cache,
            )
        )
        bar.update(task, completed=1.0, description=outcome.state)
    if as_json:
        print_json(outcome.to_json())
        return outcome
    if explain is None or not explain(outcome):
        _print_outcome(outcome, scenario.name)
    return outcome


def _print_outcome(outcome: engine.Outcome, scenario: str) -> None:
    from reef_cli.cli._output import console, error_line, markup

    if outcome.state in ("published", "pending"):
        trial: dict[str, Any] = outcome.evidence.get("trial", {})
        console().print(
            f"[green]{outcome.state} r{outcome.release}[/] of {scenario}: "
            f"{markup(outcome.message)}",
            soft_wrap=True,
        )
        if trial:
            console().print(
                markup(
                    f"trial: {trial.get('agent')} {trial.get('agent_version')} in the "
                    f"{trial.get('sandbox')} sandbox, {trial.get('requests')} recorded "
                    f"request(s), change loaded: {trial.get('loaded')}, {trial.get('seconds')}s"
                )
            )
    elif outcome.state == "unchanged":  # an outcome, not an error: exit 0, on stdout
        from rich.markup import escape

        console().print(f"unchanged: {escape(outcome.message)}; nothing published")
    else:
        error_line(f"evolve {outcome.state}: {outcome.message}")


def run_quickstart(scenario_name: str, ask: str) -> engine.Outcome:
    """`reef quickstart`: the engine's quickstart flow, its steps numbered, the evolve
    step with the progress bar, then the diff."""
    from recipes.engine import quickstart
    from reef_cli.cli._diff_view import print_diff
    from reef_cli.cli._output import console, markup
    from reef_cli.core.llm import describe_model

    out = console()

    def say(step: int, line: str) -> None:
        out.print(f"[bold]{step}.[/] {markup(line)}")

    def evolve(scenario: Scenario) -> engine.Outcome:
        out.print(f"   (model: {markup(describe_model())})")
        return run_foreground(
            scenario,
            ask=ask,
            recipe=quickstart.RECIPE,
            adapter=quickstart.AGENT,
            interactive=False,
            model=None,
            explain=_refusal,
        )

    done = quickstart.run(scenario_name, ask, evolve=evolve, say=say)
    shown = done.diff()
    if shown is None:
        return done.outcome
    out.print("what changed:")
    print_diff(*shown)
    out.print(
        f"\nNext: reef harness versions -s {scenario_name}   |   reef-pi   "
        f"(REEF_SCENARIO={scenario_name})"
    )
    return done.outcome


def refused_draft(outcome: engine.Outcome) -> dict[str, Any] | None:
    """The draft the gate refused (quality, scan or trial), when the job drafted one."""
    draft = outcome.evidence.get("draft")
    return draft if outcome.state == "rejected" and isinstance(draft, dict) else None


LITE_NEXT = (
    "a 135M model is too small to draft this reliably: run ./install.sh --run for the 1.5B "
    "model (or reef model install qwen2.5-coder-1.5b && reef model use qwen2.5-coder-1.5b), "
    "then reef quickstart again"
)
OTHER_NEXT = "run reef quickstart again, or use a stronger model (reef config set model NAME)"


def next_step(model: str) -> str:
    """What to run after a refused draft: the 1.5B model when the lite one drafted."""
    return LITE_NEXT if "smollm2" in model.lower() else OTHER_NEXT


def _refusal(outcome: engine.Outcome) -> bool:
    """Quickstart's end when the gate refused the draft: what was drafted, each reason,
    and what to run instead — an outcome of the demo (exit 0), not an error."""
    from rich.markup import escape

    from reef_cli.cli._output import console

    draft = refused_draft(outcome)
    if draft is None:
        return False
    out = console()
    model = str(outcome.evidence.get("model") or "the model")
    drafts = (outcome.evidence.get("quality") or {}).get("drafts", 1)
    failed = [
        c for c in (outcome.verdict.get("checks") or []) if c.get("status") not in ("passed", None)
    ]
    names = ", ".join(str(c.get("name")) for c in failed) or "the trial"
    change = (outcome.evidence.get("changes") or [{}])[-1]
    out.print(
        f"[bold]3.[/] nothing published: the gate refused what {escape(model)} drafted "
        f"({drafts} draft{'s' if drafts != 1 else ''}). The last one, "
        f"{escape(str(draft.get('kind')))} {escape(str(draft.get('name')))} "
        f"({escape(str(change.get('path', '?')))}):",
        soft_wrap=True,
    )
    body = str(draft.get("body") or "").splitlines()
    described = " ".join(str(draft.get("description") or "").split())  # one line
    shown = [f"description: {described}", *body[:30]]
    if len(body) > 30:
        shown.append(f"… {len(body) - 30} more line(s)")
    for line in shown:
        out.print(f"   │ {escape(line)}", soft_wrap=True, highlight=False)
    out.print("   why the gate refused it:")
    for check in failed or [{"name": "gate", "detail": outcome.message}]:
        out.print(
            f"   - {escape(str(check.get('name')))}: {escape(str(check.get('detail')))}",
            soft_wrap=True,
        )
    lite = next_step(model) == LITE_NEXT
    out.print(
        f"The {'lite model’s ' if lite else ''}draft did not pass the gate ({escape(names)}); "
        f"{escape(next_step(model))}.",
        soft_wrap=True,
    )
    return True

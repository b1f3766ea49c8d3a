"""`reef evolve` and `reef quickstart`: evolve a harness in the foreground."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from reef_cli.cli._common import JsonOpt, scenario_name

EXIT = {
    "published": 0,
    "pending": 0,
    "unchanged": 0,
    "rejected": 3,
    "invalid": 3,
    "stopped": 6,
    "failed": 1,
}


def evolve(
    ask: Annotated[str | None, typer.Argument(help="What should change, in a sentence.")] = None,
    scenario: Annotated[str | None, typer.Option("--scenario", "-s", help="Scenario.")] = None,
    recipe: Annotated[
        str,
        typer.Option("--recipe", help="Recipe: reefine (an ask) or gepa (a search on a task set)."),
    ] = "reefine",
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Ask no clarifying questions.")] = False,
    model: Annotated[
        str | None,
        typer.Option("--model", help="LiteLLM model string (default: configured or embedded)."),
    ] = None,
    adapter: Annotated[
        str, typer.Option("--adapter", "-a", help="Agent the trial runs: pi or claude-code.")
    ] = "pi",
    max_calls: Annotated[
        int | None,
        typer.Option(
            "--max-calls", help="Model-call budget [default: config max_calls, else the recipe's]."
        ),
    ] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-tokens", help="Token budget [default: config max_tokens, else the recipe's]."
        ),
    ] = None,
    max_seconds: Annotated[
        float | None,
        typer.Option(
            "--max-seconds",
            help="Wall-time budget in seconds [default: config max_seconds, else the recipe's].",
        ),
    ] = None,
    tasks: Annotated[
        Path | None,
        typer.Option(
            "--tasks",
            help="Task set for paired evaluation (default: the scenario's tasks.yaml, if any).",
        ),
    ] = None,
    max_metric_calls: Annotated[
        int | None,
        typer.Option(
            "--max-metric-calls", help="gepa: task runs the search may spend [default: 150]."
        ),
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="gepa: its random seed [default: 0].")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Evolve the harness: Reefine turns an ask into a tested, gated release; GEPA searches
    the rule and skill texts on a task set's train/val tasks, gated on its test tasks."""
    from reef_cli.cli._evolve_run import run_foreground
    from reef_cli.core import scenarios
    from reef_cli.core.budget import BudgetLimits

    limits = BudgetLimits(max_calls, max_tokens, max_seconds)  # a bad limit: say so first
    given = {"max_metric_calls": max_metric_calls, "seed": seed}
    options = {name: value for name, value in given.items() if value is not None}
    outcome = run_foreground(
        scenarios.get(scenario_name(scenario)),  # unknown scenario: before loading a model
        ask=ask,
        recipe=recipe,
        adapter=adapter,
        interactive=not yes,
        model=model,
        limits=limits,
        as_json=as_json,
        tasks_file=tasks,
        recipe_options=options,
    )
    raise typer.Exit(EXIT.get(outcome.state, 1))


QUICKSTART_ASK = "when I ask you to fix a bug, reproduce it with a failing test first"


def quickstart(
    ask: Annotated[str, typer.Option("--ask", help="The ask to evolve.")] = QUICKSTART_ASK,
    scenario: Annotated[str, typer.Option("--scenario", "-s", help="Scenario.")] = "quickstart",
) -> None:
    """The main job in one command: a scenario, pi installed in an isolated dir, one ask
    evolved into a tested release on the embedded model (or $REEF_MODEL), and the diff."""
    from reef_cli.cli._evolve_run import run_quickstart

    outcome = run_quickstart(scenario, ask)
    raise typer.Exit(EXIT.get(outcome.state, 1))

"""The work behind `reef evolve` / `reef quickstart`, with a rich progress display."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from recipes.engine import Outcome
from recipes.tasks import TASKS_FILE, TaskSet


def load_tasks(path: Path, required: bool) -> TaskSet | None:
    """The scenario's task set (``tasks.yaml`` in its folder) or the one named by --tasks."""
    from recipes.tasks import load
    from reef_cli.core.errors import ReefError

    if not path.exists():
        if required:
            raise ReefError(f"task set {path} does not exist", "pass an existing --tasks FILE")
        return None
    return load(path)


def run_foreground(
    scenario: str,
    *,
    ask: str | None,
    recipe: str,
    interactive: bool,
    model: str | None,
    max_calls: int,
    max_tokens: int,
    max_seconds: float,
    as_json: bool = False,
    tasks_file: Path | None = None,
) -> Outcome:
    from recipes import engine
    from reef_cli.cli._output import err_console, print_json
    from reef_cli.core import scenarios
    from reef_cli.core.budget import Budget
    from reef_cli.core.llm import ModelClient

    found = scenarios.get(scenario)  # unknown scenario: say so before loading a model
    tasks = load_tasks(tasks_file or found.path / TASKS_FILE, required=tasks_file is not None)
    budget = Budget(max_calls=max_calls, max_tokens=max_tokens, max_seconds=max_seconds)
    client = ModelClient(model, budget=budget)
    interactive = interactive and sys.stdin.isatty()

    def clarify(question: str) -> str:
        import typer

        return str(typer.prompt(question, default="", show_default=False))

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=err_console(),
        transient=not sys.stderr.isatty(),
        disable=as_json,
    ) as bar:
        task = bar.add_task(f"{recipe} on {scenario}", total=1.0)

        def progress(message: str, fraction: float | None = None) -> None:
            bar.update(
                task,
                description=message,
                completed=fraction if fraction is not None else bar.tasks[0].completed,
            )
            if not sys.stderr.isatty() and not as_json:
                err_console().print(f"  … {message}")

        with engine.PiRunner(scenario, client) as runner:
            outcome = engine.run(
                scenario,
                engine.recipe_named(recipe),
                model=client,
                ask=ask,
                interactive=interactive,
                clarify=clarify,
                progress=progress,
                runner=runner,
                tasks=tasks,
            )
        bar.update(task, completed=1.0, description=outcome.state)
    if as_json:
        print_json(outcome.to_json())
        return outcome
    _print_outcome(outcome, scenario)
    return outcome


def _print_outcome(outcome: Outcome, scenario: str) -> None:
    from reef_cli.cli._output import console, error_line

    if outcome.state in ("published", "pending"):
        trial: dict[str, Any] = outcome.evidence.get("trial", {})
        console().print(
            f"[green]{outcome.state} r{outcome.release}[/] of {scenario}: {outcome.message}"
        )
        if trial:
            console().print(
                f"trial: pi in the {trial.get('sandbox')} sandbox, {trial.get('requests')} "
                f"recorded request(s), change loaded: {trial.get('loaded')}, "
                f"{trial.get('seconds')}s"
            )
    else:
        error_line(f"evolve {outcome.state}: {outcome.message}")


def run_quickstart(scenario: str, ask: str) -> Outcome:
    from adapters._install import install_release
    from adapters.base import Routing
    from reef_cli.cli._output import console
    from reef_cli.cli.main import app as reef
    from reef_cli.core import paths, scenarios
    from reef_cli.core.config import load_settings
    from reef_cli.core.llm import ModelClient
    from reef_cli.core.publishing import publish_files
    from reef_cli.core.tree import starter_tree

    out = console()
    found = scenarios.get_or_create(scenario)
    if found.chain().latest() is None:
        publish_files(scenario, starter_tree().files(), reason="starter tree (reef quickstart)")
    settings = load_settings()
    target = paths.agent_dir("pi", scenario)
    routing = Routing(f"http://{settings.serve_host}:{settings.serve_port}", scenario)
    installed, where = install_release("pi", scenario, routing, "served", target)
    out.print(f"[bold]1.[/] scenario {scenario}: r{installed.number} installed for pi in {where}")
    out.print(f"[bold]2.[/] reef-pi evolve {ask!r}  (model: {ModelClient(None).describe()})")
    outcome = run_foreground(
        scenario,
        ask=ask,
        recipe="reefine",
        interactive=False,
        model=None,
        max_calls=20,
        max_tokens=200_000,
        max_seconds=1800,
    )
    if outcome.state not in ("published", "pending"):
        return outcome
    install_release("pi", scenario, routing, "latest", target)
    out.print(f"[bold]3.[/] installed r{outcome.release} for pi; what changed:")
    reef(
        ["harness", "diff", "previous", "latest", "-s", scenario],
        prog_name="reef",
        standalone_mode=False,
    )
    out.print(
        f"\nNext: reef harness versions -s {scenario}   |   reef-pi   (REEF_SCENARIO={scenario})"
    )
    return outcome

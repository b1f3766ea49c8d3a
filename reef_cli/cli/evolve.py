"""`reef evolve` and `reef quickstart`: evolve a harness in the foreground."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from reef_cli.cli._common import JsonOpt, NoCacheOpt, scenario_name
from reef_cli.core.asks import QUICKSTART_ASK

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
        typer.Option(
            "--recipe",
            help="Recipe: {recipes}.",
        ),
    ] = "reefine",
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Ask no clarifying questions.")] = False,
    model: Annotated[
        str | None,
        typer.Option("--model", help="LiteLLM model string (default: configured or embedded)."),
    ] = None,
    adapter: Annotated[
        str,
        typer.Option(
            "--adapter",
            "-a",
            help="Agent the trial (and meta-harness's proposer) runs: {adapters}.",
        ),
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
            "--max-metric-calls",
            help="gepa: task runs the search may spend [default: 15 x the val tasks, as the "
            "time limit allows].",
        ),
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="gepa: its random seed [default: 0].")
    ] = None,
    iterations: Annotated[
        int | None,
        typer.Option(
            "--iterations",
            help="meta-harness: attempts, each one candidate the agent writes [default: 3].",
        ),
    ] = None,
    schedule: Annotated[
        str | None,
        typer.Option(
            "--schedule",
            help="nightly: print a crontab line that runs this evolve every night, and exit "
            "(a recipe that needs no ask: {unattended_recipes}).",
        ),
    ] = None,
    no_cache: NoCacheOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Evolve the harness: Reefine turns an ask into a tested, gated release; GEPA searches
    the rule and skill texts on a task set's train/val tasks, gated on its test tasks;
    Meta-Harness lets the agent (--adapter) rewrite the tree with every earlier
    candidate's scores and failing traces at hand, gated the same way; SkillClaw edits
    skills from the sessions and reports recorded since its last run."""
    from reef_cli.cli._evolve_run import run_foreground
    from reef_cli.core import agents, plugins, scenarios
    from reef_cli.core.budget import BudgetLimits

    plugins.recipe(recipe)  # an unknown recipe or agent: say so before anything else
    agents.get(adapter)
    limits = BudgetLimits(max_calls, max_tokens, max_seconds)  # a bad limit: say so first
    given = {"max_metric_calls": max_metric_calls, "seed": seed, "iterations": iterations}
    options = {name: value for name, value in given.items() if value is not None}
    if schedule is not None:
        found = scenarios.get(scenario_name(scenario))  # an unknown scenario: say so now
        args = ["--recipe", recipe, "-s", found.name]
        if tasks is not None:
            args += ["--tasks", str(tasks.absolute())]
        if adapter != "pi":
            args += ["--adapter", adapter]
        for flag, value in (
            ("--model", model),
            ("--max-calls", max_calls),
            ("--max-tokens", max_tokens),
            ("--max-seconds", max_seconds),
            ("--max-metric-calls", max_metric_calls),
            ("--seed", seed),
            ("--iterations", iterations),
        ):
            if value is not None:
                args += [flag, str(value)]
        if no_cache:
            args.append("--no-cache")
        _print_schedule(schedule, recipe, found.name, args, as_json)
        return
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
        cache=not no_cache,
    )
    raise typer.Exit(EXIT.get(outcome.state, 1))


NIGHTLY = "17 3 * * *"  # 03:17 every night, off the hour most jobs pick


def reef_executable() -> str:
    """The absolute path of the running `reef` (cron has a bare PATH): this venv's
    console script, else the one on PATH, else ``python -m reef_cli``."""
    import shlex
    import shutil
    import sys

    started = Path(sys.argv[0])
    if started.name == "reef" and started.exists():
        return shlex.quote(str(started.absolute()))
    beside = Path(sys.executable).parent / "reef"  # not resolved: a venv's python is a link
    if beside.exists():
        return shlex.quote(str(beside.absolute()))
    found = shutil.which("reef")
    if found:
        return shlex.quote(str(Path(found).absolute()))
    return f"{shlex.quote(sys.executable)} -m reef_cli"


def nightly_line(recipe: str, scenario: str, args: list[str]) -> str:
    """A crontab line running ``reef evolve ARGS --yes`` at night, with this state dir,
    the model settings from the environment, and its output appended to a log."""
    import os
    import shlex

    from reef_cli.core import paths

    state = paths.ensure_state_dir()
    env = {"REEF_HOME": str(state)}
    for name in ("REEF_MODEL", "REEF_API_BASE"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    log = state / f"evolve-{recipe}-{scenario}.log"
    command = " ".join(shlex.quote(a) for a in ["evolve", *args, "--yes"])
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return f"{NIGHTLY} {prefix} {reef_executable()} {command} >> {shlex.quote(str(log))} 2>&1"


def _print_schedule(when: str, recipe: str, scenario: str, args: list[str], as_json: bool) -> None:
    from reef_cli.cli._output import err_console, print_json, safe
    from reef_cli.core.errors import OptionInvalid

    if when != "nightly":
        raise OptionInvalid(f"--schedule takes nightly (got {when!r})", "pass --schedule nightly")
    from reef_cli.core import plugins

    if plugins.recipe(recipe).needs_ask:
        unattended = plugins.recipe_names(unattended=True)
        raise OptionInvalid(
            f"--schedule is for recipes that need no ask ({', '.join(unattended)}), not {recipe}",
            f"pass --recipe {' or --recipe '.join(unattended)}",
        )
    line = nightly_line(recipe, scenario, args)
    if as_json:
        print_json({"schedule": when, "crontab": line})
        return
    typer.echo(safe(line))
    again = " ".join(["reef", "evolve", *args, "--schedule", when])
    err_console().print(
        safe(f"add it to your crontab: (crontab -l 2>/dev/null; {again}) | crontab -"),
        highlight=False,
        markup=False,
    )


def quickstart(
    ask: Annotated[str, typer.Option("--ask", help="The ask to evolve.")] = QUICKSTART_ASK,
    scenario: Annotated[str, typer.Option("--scenario", "-s", help="Scenario.")] = "quickstart",
) -> None:
    """The main job in one command: a scenario, pi installed in an isolated dir, one ask
    evolved into a tested release on the embedded model (or $REEF_MODEL), and the diff."""
    from reef_cli.cli._evolve_run import refused_draft, run_quickstart

    outcome = run_quickstart(scenario, ask)
    if refused_draft(outcome) is not None:  # the demo ran: the gate refused, and said why
        raise typer.Exit(0)
    raise typer.Exit(EXIT.get(outcome.state, 1))

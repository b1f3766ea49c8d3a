"""Options and small helpers shared by several command groups."""

from __future__ import annotations

from typing import Annotated

import typer

ScenarioOpt = Annotated[
    str | None,
    typer.Option(
        "--scenario", "-s", help="Scenario name (default: the `default_scenario` setting)."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
NoCacheOpt = Annotated[
    bool,
    typer.Option(
        "--no-cache",
        help="Ask the embedded model again instead of reusing its stored answers at "
        "temperature 0 (the new answers are stored).",
    ),
]


def scenario_name(name: str | None) -> str:
    """The scenario to act on: the option's value or the configured default."""
    if name:
        return name
    from reef_cli.core.config import load_settings

    return load_settings().default_scenario


def new_app(help_text: str) -> typer.Typer:
    """A command group. Plain (non-rich) help keeps `--help` from importing rich: start-up
    speed is a feature, and the text is the same."""
    return typer.Typer(help=help_text, no_args_is_help=True, rich_markup_mode=None)

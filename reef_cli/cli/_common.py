"""Options and small helpers shared by several command groups."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

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


# Placeholders an option's help may hold, filled in from the registries and tables when
# the help is shown: listing them at import would read the entry points (and import the
# task sets' package) on every start.
def _registry_texts() -> dict[str, Callable[[], str]]:
    from reef_cli.core import agents, plugins

    def task_sources() -> str:
        from recipes.tasks.sources import catalog

        return catalog.names_text()

    def task_sizes(split: str) -> Callable[[], str]:
        def text() -> str:
            from recipes.tasks.sources import catalog

            return catalog.sizes_text(split)

        return text

    return {
        "{recipes}": plugins.recipes_text,
        "{unattended_recipes}": plugins.unattended_text,
        "{adapters}": agents.names_text,
        "{task_sources}": task_sources,
        **{f"{{task_sizes_{split}}}": task_sizes(split) for split in ("train", "val", "test")},
    }


def _fill_registry_help(params: list[Any]) -> None:
    for param in params:
        text = getattr(param, "help", None)
        if isinstance(text, str) and "{" in text:
            for mark, fill in _registry_texts().items():
                text = text.replace(mark, fill()) if mark in text else text
            param.help = text


# typer vendors its own click: its classes, not click's, are what these receive.
class RegistryHelp(TyperCommand):
    """A command whose options' help names what is registered (``{recipes}``,
    ``{unattended_recipes}``, ``{adapters}``) or shipped (``{task_sources}``,
    ``{task_sizes_train}`` …): a plugin's recipe or agent shows up in ``--help`` like Reef's
    own, a new task source as soon as its row is in the table, and ``reef --help`` still
    reads no entry point."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _fill_registry_help(self.params)
        super().format_help(ctx, formatter)


class RegistryHelpGroup(TyperGroup):
    """``RegistryHelp`` for a group whose callback has options (`reef serve`)."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _fill_registry_help(self.params)
        super().format_help(ctx, formatter)

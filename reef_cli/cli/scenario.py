"""`reef scenario …`: create, list, show, delete (archive) and restore scenarios."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from reef_cli.cli._common import JsonOpt, new_app

if TYPE_CHECKING:
    from reef_cli.core.scenarios import Scenario

app = new_app("Scenarios: one evolving harness each.")

NameArg = Annotated[str, typer.Argument(help="Scenario name (kebab-case).")]


def _summary(scenario: Scenario) -> dict[str, Any]:
    chain = scenario.chain()
    latest = chain.latest()
    served = chain.served() if latest else None
    return {
        "name": scenario.name,
        "description": scenario.description,
        "created_at": scenario.created_at,
        "releases": latest.number if latest else 0,
        "latest": latest.number if latest else None,
        "served": served.number if served else None,
        "path": str(scenario.path),
    }


@app.command()
def create(
    name: NameArg,
    description: Annotated[str, typer.Option("--description", "-d", help="What it is for.")] = "",
) -> None:
    """Create a scenario with an empty release chain."""
    from reef_cli.cli._output import console
    from reef_cli.core import scenarios

    scenario = scenarios.create(name, description)
    console().print(f"Created scenario [bold]{scenario.name}[/] at {scenario.path}")


@app.command("list")
def list_(
    as_json: JsonOpt = False,
    archived: Annotated[bool, typer.Option("--archived", help="List archived scenarios.")] = False,
) -> None:
    """List scenarios with their release counts."""
    from reef_cli.cli._output import console, print_json
    from reef_cli.core import scenarios

    if archived:
        names = [p.name for p in scenarios.list_archived()]
        if as_json:
            print_json(names)
        else:
            for item in names or ["(no archived scenarios)"]:
                console().print(item)
        return
    rows = [_summary(s) for s in scenarios.list_all()]
    if as_json:
        print_json(rows)
        return
    if not rows:
        console().print("No scenarios yet: `reef scenario create NAME`.")
        return
    from rich.table import Table

    table = Table()
    for column in ("name", "releases", "served", "created", "description"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["name"],
            str(row["releases"]),
            f"r{row['served']}" if row["served"] else "-",
            row["created_at"],
            row["description"],
        )
    console().print(table)


@app.command()
def show(name: NameArg, as_json: JsonOpt = False) -> None:
    """Show one scenario."""
    from reef_cli.cli._output import console, print_json
    from reef_cli.core import scenarios

    row = _summary(scenarios.get(name))
    if as_json:
        print_json(row)
        return
    for key, value in row.items():
        console().print(f"{key + ':':<13}{value}")


@app.command()
def delete(name: NameArg) -> None:
    """Archive a scenario (moved aside, never destroyed; see `restore`)."""
    from reef_cli.cli._output import console
    from reef_cli.core import scenarios

    target = scenarios.delete(name)
    console().print(f"Archived scenario {name} to {target}")
    console().print(f"Undo with: reef scenario restore {target.name}")


@app.command()
def restore(
    archived: Annotated[str, typer.Argument(help="Archived name from `list --archived`.")],
) -> None:
    """Bring an archived scenario back."""
    from reef_cli.cli._output import console
    from reef_cli.core import scenarios

    scenario = scenarios.restore(archived)
    console().print(f"Restored scenario {scenario.name}")

"""`reef doctor`: one table of what this machine has for Reef."""

from __future__ import annotations

import typer

from reef_cli.cli._common import JsonOpt


def doctor(as_json: JsonOpt = False) -> None:
    """Check git, sandbox tools, Node, agents, the embedded model and the state dir."""
    from reef_cli.cli._output import console, print_json
    from reef_cli.core.doctor import run_checks

    rows = run_checks()
    if as_json:
        print_json([r.to_json() for r in rows])
    else:
        from rich.table import Table

        table = Table(title="reef doctor", title_justify="left")
        for column in ("check", "status", "detail", "fix"):
            table.add_column(column)
        colour = {"ok": "green", "warn": "yellow", "fail": "red"}
        for row in rows:
            fix = row.fix if row.status != "ok" else ""
            table.add_row(row.name, f"[{colour[row.status]}]{row.status}[/]", row.detail, fix)
        console().print(table)
    if any(r.status == "fail" for r in rows):
        raise typer.Exit(1)

"""`reef doctor`: one table of what this machine has for Reef."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from reef_cli.cli._common import JsonOpt

if TYPE_CHECKING:
    from reef_cli.cli.doctor_checks import Row


def sandbox_rows() -> list[Row]:
    """The sandbox's own checks (core does not import the sandbox: the CLI wires it in)."""
    from reef_cli.cli.doctor_checks import Row

    try:
        import sandbox
    except ImportError:
        return []
    try:
        checked = sandbox.check()
    except Exception as exc:  # one broken probe must not take the whole table down
        return [
            Row(
                "sandbox",
                "warn",
                f"the check failed: {type(exc).__name__}: {exc}",
                "run `reef sandbox check`",
            )
        ]
    # Isolation is optional until a trial runs: a missing piece is a warning.
    return [Row(r.name, "ok" if r.ok else "warn", r.detail, r.fix) for r in checked]


def install_rows() -> list[Row]:
    """Every recorded install whose hooks/extension run a `reef` that no longer exists
    (the venv moved or was rebuilt): a stale install, with the command that renews it."""
    import adapters
    from reef_cli.cli.doctor_checks import Row
    from reef_cli.core import installs, launcher

    rows = []
    recorded = installs.all_installs()
    for install in recorded:
        target = Path(install.target)
        if not target.is_dir():
            continue
        try:
            record = adapters.get(install.adapter).installed(target) or {}
        except Exception:  # an adapter this Reef no longer has, an unreadable folder
            continue
        command = record.get("reef_command")
        if isinstance(command, str) and launcher.is_stale(command):
            rows.append(
                Row(
                    f"install {install.adapter}",
                    "warn",
                    f"stale: {target} runs {command}, which no longer exists "
                    "(/versions and update notices fall back to `reef` on PATH, or are off)",
                    f"reef harness install --adapter {install.adapter} -s {install.scenario} "
                    f"--release {install.release} --target {target}",
                )
            )
    if not rows:
        count = f"{len(recorded)} recorded" if recorded else "none recorded"
        rows.append(Row("installs", "ok", f"{count}; every install runs an existing `reef`"))
    return rows


def doctor(as_json: JsonOpt = False) -> None:
    """Check git, sandbox tools, Node, agents, models, installs and the state dir."""
    from reef_cli.cli._output import console, markup, print_json
    from reef_cli.cli.doctor_checks import run_checks

    rows = run_checks(sandbox_rows=sandbox_rows(), install_rows=install_rows())
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
            # details quote paths, versions and what a probe printed: escaped
            table.add_row(
                markup(row.name),
                f"[{colour[row.status]}]{row.status}[/]",
                markup(row.detail),
                markup(fix or ""),
            )
        console().print(table)
    if any(r.status == "fail" for r in rows):
        raise typer.Exit(1)

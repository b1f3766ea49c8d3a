"""The `reef` command: a thin shell over ``reef_cli.core``.

Only typer is imported at start-up; each command imports what it needs when it runs.
Every ``ReefError`` is caught once, here, and printed as one red line with its fix.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from reef_cli import __version__
from reef_cli.cli import (
    bench,
    config,
    doctor,
    eval,
    evolve,
    harness,
    hook,
    model,
    records,
    report,
    sandbox,
    scenario,
    serve,
    sessions,
    tasks,
    token,
)
from reef_cli.cli._common import RegistryHelp


class ReefGroup(TyperGroup):
    """Turns ``ReefError`` into ``reef: error: … (fix: …)`` and its exit code."""

    def invoke(self, ctx: Any) -> Any:
        from reef_cli.core.errors import ReefError

        try:
            return super().invoke(ctx)
        except ReefError as exc:
            from reef_cli.cli._output import error_line

            error_line(exc.one_line(), prog=ctx.find_root().info_name or "reef")
            raise typer.Exit(exc.exit_code) from None


app = typer.Typer(
    name="reef",
    cls=ReefGroup,
    help="Reef: your coding agent's harness as a versioned, gated artifact that evolves from use.",
    no_args_is_help=True,
    rich_markup_mode=None,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(serve.app, name="serve")
app.add_typer(harness.app, name="harness")
app.add_typer(scenario.app, name="scenario")
app.add_typer(config.app, name="config")
app.add_typer(sandbox.app, name="sandbox")
app.add_typer(records.app, name="records")
app.add_typer(sessions.app, name="sessions")
app.add_typer(token.app, name="token")
app.add_typer(model.app, name="model")
app.add_typer(tasks.app, name="tasks")
app.add_typer(bench.app, name="bench")
app.command("report")(report.report)
app.command("doctor")(doctor.doctor)
app.command("evolve", cls=RegistryHelp)(evolve.evolve)
app.command("quickstart")(evolve.quickstart)
app.command("eval")(eval.eval_releases)
app.command("hook", hidden=True, context_settings=hook.HOOK_CONTEXT)(hook.hook)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"reef {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """Reef: your coding agent's harness as a versioned, gated artifact that evolves from use."""


def run() -> None:
    app(prog_name="reef")

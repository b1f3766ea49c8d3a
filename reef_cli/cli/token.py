"""`reef token`: print the server token; create, list and revoke scenario tokens."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="Tokens for `reef serve` (bearer / x-api-key).",
    invoke_without_command=True,
    rich_markup_mode=None,
)


@app.callback()
def main(ctx: typer.Context) -> None:
    """Print the main token ($REEF_TOKEN, else generated once and stored 0600)."""
    if ctx.invoked_subcommand is None:
        from reef_cli.cli._output import echo
        from reef_cli.core.tokens import main_token

        echo(main_token(create=True))


@app.command("create")
def create(
    name: str = typer.Argument(..., help="a kebab-case name for the token"),
    scenario: list[str] = typer.Option(..., "--scenario", "-s", help="scenario(s) it may use"),
) -> None:
    """Create a token limited to the named scenarios; it is printed once, stored hashed."""
    from reef_cli.core.tokens import create_scoped

    typer.echo(create_scoped(name, scenario))
    typer.echo("(shown once; a running `reef serve` accepts it from its next request)", err=True)


@app.command("list")
def list_tokens(as_json: bool = typer.Option(False, "--json")) -> None:
    """List scenario tokens (names and scenarios, never the tokens)."""
    import json

    from reef_cli.core.tokens import list_scoped

    rows = [t.to_json() for t in list_scoped()]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    from reef_cli.cli._output import echo  # tokens.json may be edited by hand

    for row in rows:
        echo(f"{row['name']}: {', '.join(row['scenarios'])}")
    if not rows:
        typer.echo("no scenario tokens (create one with `reef token create NAME --scenario S`)")


@app.command("revoke")
def revoke(name: str = typer.Argument(...)) -> None:
    """Revoke a scenario token; a running `reef serve` refuses it from its next request."""
    from reef_cli.core.tokens import revoke_scoped

    revoke_scoped(name)
    typer.echo(f"revoked {name}; a running `reef serve` refuses it from its next request")

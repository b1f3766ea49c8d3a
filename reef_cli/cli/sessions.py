"""`reef sessions list|show`: records grouped by session id."""

from __future__ import annotations

import typer

from reef_cli.cli._common import new_app

app = new_app("Sessions: records that share a session id.")


@app.command("list")
def list_sessions(
    scenario: str | None = typer.Option(None, "--scenario", "-s"),
    limit: int = typer.Option(20, "--limit", "-n"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """List recent sessions, newest first."""
    import json

    from rich.console import Console
    from rich.table import Table

    from reef_cli.core.records import RecordStore

    rows = RecordStore().sessions(scenario=scenario, limit=limit)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        typer.echo("no sessions yet (send x-reef-session, or use Claude Code through `reef serve`)")
        return
    table = Table("session", "scenario", "records", "started", "last", "tokens in/out")
    for s in rows:
        table.add_row(
            s["session_id"],
            s["scenario"],
            str(s["records"]),
            s["started_at"][:19],
            s["last_at"][:19],
            f"{s['input_tokens']}/{s['output_tokens']}",
        )
    Console().print(table)


@app.command("show")
def show(
    session: str = typer.Argument(..., help="session id"),
    as_json: bool = typer.Option(False, "--json", help="whole records as JSON"),
) -> None:
    """The records of one session, oldest first."""
    import json

    from reef_cli.core.errors import ReefError
    from reef_cli.core.records import RecordStore

    records = list(RecordStore().iter(session_id=session))
    if not records:
        raise ReefError(f"no records for session {session!r}", "see `reef sessions list`")
    if as_json:
        typer.echo(json.dumps([r.to_json() for r in records], indent=2, ensure_ascii=False))
        return
    for r in records:
        typer.echo(
            f"{r.created_at[:19]}  {r.id}  {r.scenario}  status={r.status}  "
            f"tokens={r.input_tokens or 0}/{r.output_tokens or 0}"
        )

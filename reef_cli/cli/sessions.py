"""`reef sessions list|show|harvest`: records grouped by session id, and the agents' own
transcripts of those sessions (the logic lives in adapters/harvest_all.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from reef_cli.cli._common import RegistryHelp, new_app

app = new_app("Sessions: records that share a session id, and the agents' transcripts.")


@app.command("list")
def list_sessions(
    scenario: str | None = typer.Option(None, "--scenario", "-s"),
    limit: int = typer.Option(20, "--limit", "-n"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """List recent sessions, newest first (records and harvested transcripts)."""
    from rich.table import Table

    from adapters.harvest_all import overview
    from reef_cli.cli._output import console, markup, print_json
    from reef_cli.core.store import open_store

    rows = overview(open_store(), scenario=scenario, limit=limit)
    if as_json:
        print_json(rows)
        return
    if not rows:
        typer.echo(
            "no sessions yet (send x-reef-session, use an agent through `reef serve`, "
            "or run `reef sessions harvest`)"
        )
        return
    table = Table("session", "agent", "scenario", "records", "turns", "started", "last", "tokens")
    for s in rows:
        table.add_row(  # ids and agents come from headers and transcripts: escaped
            markup(s["session_id"]),
            markup(s.get("agent") or "-"),
            markup(s.get("scenario") or "-"),
            str(s["records"]) if s.get("has_records") else "none",
            str(s["turns"]) if s.get("turns") is not None else "-",
            markup((s.get("started_at") or "")[:19]),
            markup((s.get("last_at") or "")[:19]),
            f"{s['input_tokens']}/{s['output_tokens']}",
        )
    console().print(table)


@app.command("show")
def show(
    session: str = typer.Argument(..., help="session id (the records' or the agent's own)"),
    as_json: bool = typer.Option(
        False, "--json", help='JSON: {"records": [whole records], "transcripts": [summaries]}'
    ),
) -> None:
    """The records of one session, oldest first, and its harvested transcript."""
    from adapters.harvest_all import detail, summary
    from reef_cli.cli._output import echo, json_text
    from reef_cli.core.errors import ReefError
    from reef_cli.core.store import open_store

    records, transcripts = detail(open_store(), session)
    if not records and not transcripts:
        raise ReefError(
            f"no records or transcript for session {session!r}",
            "see `reef sessions list`; `reef sessions harvest` reads the agents' transcripts",
        )
    summaries = [summary(t) for t in transcripts]
    if as_json:
        data = {
            "session_id": session,
            "records": [r.to_json() for r in records],
            "transcripts": summaries,
        }
        typer.echo(json_text(data))
        return
    for t in summaries:
        roles = ", ".join(f"{n} {role}" for role, n in t["turns_by_role"].items())
        calls = ", ".join(f"{name}×{n}" for name, n in t["tool_calls"].items()) or "none"
        echo(f"transcript: {t['agent']} session {t['session_id']}  ({t['path']})")
        echo(
            f"  cwd {t['cwd'] or '-'}  model {t['model'] or '-'}  "
            f"{(t['started_at'] or '')[:19]} .. {(t['ended_at'] or '')[:19]}"
        )
        echo(f"  turns: {t['turns']}" + (f" ({roles})" if roles else ""))
        echo(f"  tool calls: {calls}")
        echo(f"  skills used: {', '.join(t['skills_used']) or 'none'}")
        echo(f"  receipts: {len(t['receipts'])}")
    if transcripts:
        typer.echo("records:" if records else "records: none")
    for r in records:
        echo(
            f"{r.created_at[:19]}  {r.id}  {r.scenario}  status={r.status}  "
            f"tokens={r.input_tokens or 0}/{r.output_tokens or 0}"
        )


@app.command("harvest", cls=RegistryHelp)
def harvest(
    adapter: str | None = typer.Option(
        None, "--adapter", "-a", help="{adapters} [default: every installed agent]"
    ),
    target: Path | None = typer.Option(
        None, "--target", help="an agent folder [default: every install Reef knows of]"
    ),
    since: str | None = typer.Option(
        None, "--since", help="only sessions active since this ISO date/time"
    ),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Read the agents' transcripts into Reef's sessions.

    Harvesting a session again replaces its row. Unreadable transcript lines are skipped
    and counted."""
    from adapters.harvest_all import harvest as run
    from adapters.harvest_all import parse_since
    from reef_cli.cli._output import echo, print_json

    result = run(adapter, target, parse_since(since))
    if as_json:
        print_json(result.to_json())
        return
    for t in result.targets:
        if t.error:
            echo(f"warning: {t.adapter} {t.target}: {t.error}", err=True)
    where = len(result.targets)
    line = (
        f"stored {result.stored} session(s) from {where} folder(s); {result.linked} link to records"
    )
    if result.skipped_lines:
        line += f"; skipped {result.skipped_lines} unreadable transcript line(s)"
    if not where:
        line += " (no installs known: pass --target DIR)"
    typer.echo(line)

"""`reef records list|show|export`: the recorded inference exchanges."""

from __future__ import annotations

from pathlib import Path

import typer

from reef_cli.cli._common import new_app

app = new_app("Recorded inference exchanges (one per receipt).")


@app.command("list")
def list_records(
    scenario: str | None = typer.Option(None, "--scenario", "-s", help="only this scenario"),
    session: str | None = typer.Option(None, "--session", help="only this session id"),
    limit: int = typer.Option(20, "--limit", "-n", help="newest N records"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """List the newest records."""
    import json

    from rich.console import Console
    from rich.table import Table

    from reef_cli.core.records import RecordStore

    rows = RecordStore().list(scenario=scenario, session_id=session, limit=limit)
    if as_json:
        typer.echo(json.dumps([r.summary() for r in rows], indent=2))
        return
    if not rows:
        typer.echo("no records yet (send requests through `reef serve`)")
        return
    table = Table(
        "receipt",
        "when",
        "scenario",
        "release",
        "dialects",
        "model",
        "status",
        "tokens in/out",
        "ms",
    )
    for r in rows:
        table.add_row(
            r.id,
            r.created_at[:19],
            r.scenario,
            "-" if r.release_id is None else f"r{r.release_id}",
            f"{r.client_dialect}->{r.upstream_dialect}",
            r.model or "",
            str(r.status),
            f"{r.input_tokens or 0}/{r.output_tokens or 0}",
            f"{r.latency_ms or 0:.0f}",
        )
    Console().print(table)


@app.command("show")
def show(receipt: str = typer.Argument(..., help="the receipt (x-reef-agent-record-id)")) -> None:
    """Print one record as JSON: request, response, usage, latency, status."""
    import json

    from reef_cli.core.records import RecordStore

    typer.echo(json.dumps(RecordStore().get(receipt).to_json(), indent=2, ensure_ascii=False))


@app.command("export")
def export(
    jsonl: bool = typer.Option(True, "--jsonl/--json", help="one JSON object per line"),
    scenario: str | None = typer.Option(None, "--scenario", "-s"),
    since: str | None = typer.Option(None, "--since", help="ISO time, e.g. 2026-01-31"),
    output: Path | None = typer.Option(None, "--output", "-o", help="file (default: stdout)"),
) -> None:
    """Export whole records, oldest first."""
    import json
    import sys

    from reef_cli.core.records import RecordStore

    out = output.open("w", encoding="utf-8") if output else sys.stdout
    try:
        items = RecordStore().iter(scenario=scenario, since=since)
        if jsonl:
            for rec in items:
                out.write(json.dumps(rec.to_json(), ensure_ascii=False) + "\n")
        else:
            json.dump([r.to_json() for r in items], out, indent=2, ensure_ascii=False)
            out.write("\n")
    finally:
        if output:
            out.close()

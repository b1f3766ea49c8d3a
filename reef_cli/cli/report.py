"""`reef report`: score or comment on a recorded exchange from the command line."""

from __future__ import annotations

import typer


def report(
    score: float | None = typer.Option(None, "--score", help="a finite number"),
    feedback: str | None = typer.Option(None, "--feedback", "-m", help="free text"),
    receipt: list[str] | None = typer.Option(
        None, "--receipt", "-r", help="receipt(s) to report on"
    ),
    last: bool = typer.Option(False, "--last", help="the newest record (of --scenario if given)"),
    scenario: str | None = typer.Option(None, "--scenario", "-s"),
    report_id: str | None = typer.Option(None, "--id", help="idempotency id"),
    as_json: bool = typer.Option(False, "--json", help="print the stored report as JSON"),
) -> None:
    """Store a report (score and/or feedback) on records, by receipt or --last."""
    from reef_cli.cli._output import echo, print_json
    from reef_cli.core.errors import ReefError
    from reef_cli.core.reports import parse_report, save_report
    from reef_cli.core.store import open_store

    store = open_store()
    refs = list(receipt or [])
    if last:
        newest = store.latest(scenario)
        if newest is None:
            raise ReefError("there are no records yet", "send a request through `reef serve` first")
        refs.append(newest.id)
    if not refs:
        raise ReefError("name what you report on", "pass --receipt REC or --last")
    body: dict[str, object] = {"references": refs}
    if score is not None:
        body["score"] = score
    if feedback is not None:
        body["feedback"] = feedback
    if report_id is not None:
        body["id"] = report_id
    stored = save_report(store, parse_report(body), scenario)
    if as_json:
        print_json(stored.to_json())
    else:
        verb = "stored" if stored.created else "already stored"
        echo(f"{verb} report {stored.id} on {', '.join(stored.references)} ({stored.scenario})")

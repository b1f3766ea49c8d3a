"""`reef records list|show|export|stats|evict|migrate`: the recorded inference exchanges."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from reef_cli.cli._common import new_app

app = new_app("Recorded inference exchanges (one per receipt).")


TAG_OPTION = typer.Option(
    None,
    "--tag",
    help="only records sent with this x-reef-tag-NAME header value (NAME=VALUE; repeat: all)",
)


def _tags(specs: list[str] | None) -> dict[str, str] | None:
    from reef_cli.server.tags import parse_filter

    return dict(parse_filter(spec) for spec in specs) if specs else None


@app.command("list")
def list_records(
    scenario: str | None = typer.Option(None, "--scenario", "-s", help="only this scenario"),
    session: str | None = typer.Option(None, "--session", help="only this session id"),
    limit: int = typer.Option(20, "--limit", "-n", help="newest N records"),
    tag: list[str] | None = TAG_OPTION,
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """List the newest records."""
    from rich.table import Table

    from reef_cli.cli._output import console, markup, print_json
    from reef_cli.core.store import open_store

    rows = open_store().list(scenario=scenario, session_id=session, limit=limit, tags=_tags(tag))
    if as_json:
        print_json([r.summary() for r in rows])
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
        table.add_row(  # a record's fields came over the wire: every one is escaped
            markup(r.id),
            markup(r.created_at[:19]),
            markup(r.scenario),
            "-" if r.release_id is None else f"r{r.release_id}",
            markup(f"{r.client_dialect}->{r.upstream_dialect}"),
            markup(r.model or ""),
            markup(r.status),
            f"{r.input_tokens or 0}/{r.output_tokens or 0}",
            f"{r.latency_ms or 0:.0f}",
        )
    console().print(table)


@app.command("show")
def show(receipt: str = typer.Argument(..., help="the receipt (x-reef-agent-record-id)")) -> None:
    """Print one record as JSON: request, response, usage, latency, status."""
    from reef_cli.cli._output import json_text
    from reef_cli.core.store import open_store

    typer.echo(json_text(open_store().get(receipt).to_json()))


@app.command("export")
def export(
    jsonl: bool = typer.Option(True, "--jsonl/--json", help="one JSON object per line"),
    scenario: str | None = typer.Option(None, "--scenario", "-s"),
    since: str | None = typer.Option(None, "--since", help="ISO time, e.g. 2026-01-31"),
    output: Path | None = typer.Option(None, "--output", "-o", help="file (default: stdout)"),
    tag: list[str] | None = TAG_OPTION,
) -> None:
    """Export whole records, oldest first."""
    import sys

    from reef_cli.cli._output import json_text
    from reef_cli.core.store import open_store

    filters = _tags(tag)  # a bad --tag: one line, before the output file is made
    out = output.open("w", encoding="utf-8") if output else sys.stdout
    try:
        items = open_store().iter(scenario=scenario, since=since, tags=filters)
        if jsonl:
            for rec in items:
                out.write(json_text(rec.to_json(), indent=None) + "\n")
        else:
            out.write(json_text([r.to_json() for r in items]) + "\n")
    finally:
        if output:
            out.close()


def _size(nbytes: int) -> str:
    """Decimal units, as ``records_max_gb`` counts them."""
    value = float(nbytes)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


@app.command("stats")
def stats(as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Records and bytes per scenario, what eviction keeps, and the budget."""
    from reef_cli.core import retention
    from reef_cli.core.config import load_settings
    from reef_cli.core.store import open_store

    settings = load_settings()
    store = open_store()
    try:
        sizes = store.sizes()
        cited = len(store.exists(sorted(retention.cited_receipts())))
    finally:
        store.close()
    total = {
        "records": sum(s.records for s in sizes),
        "bytes": sum(s.bytes for s in sizes),
        "referenced": sum(s.referenced for s in sizes),
        "cited": cited,
    }
    budget = {
        "max_gb": settings.records_max_gb,
        "max_age_days": settings.records_max_age_days,
    }
    if as_json:
        from reef_cli.cli._output import print_json

        print_json(
            {
                "store": {"kind": store.kind, "url": store.url},
                "scenarios": [s.to_json() for s in sizes],
                "total": total,
                "budget": budget,
            }
        )
        return
    _print_stats(store.url, sizes, total, budget)


def _print_stats(url: str, sizes: list[Any], total: dict[str, int], budget: dict[str, Any]) -> None:
    from rich.table import Table

    from reef_cli.cli._output import console, markup

    table = Table(
        "scenario", "records", "size", "oldest", "newest", "referenced", title=markup(url)
    )
    for s in sizes:
        table.add_row(
            markup(s.scenario),
            str(s.records),
            _size(s.bytes),
            markup((s.oldest or "-")[:19]),
            markup((s.newest or "-")[:19]),
            str(s.referenced),
        )
    table.add_row("total", str(total["records"]), _size(total["bytes"]), "", "", "")
    console().print(table)
    kept = f"kept whatever the budget: {total['referenced']} referenced by reports"
    console().print(f"{kept}, {total['cited']} cited by releases")
    limits = []
    if budget["max_gb"] is not None:
        limits.append(f"{budget['max_gb']:g} GB")
    if budget["max_age_days"] is not None:
        limits.append(f"{budget['max_age_days']:g} days")
    console().print(
        f"budget: {', '.join(limits)}"
        if limits
        else "budget: none (reef config set records_max_gb 5 / records_max_age_days 90)"
    )


@app.command("evict")
def evict(
    max_gb: float | None = typer.Option(
        None, "--max-gb", min=0, help="size budget for this run (default: records_max_gb)"
    ),
    max_age_days: float | None = typer.Option(
        None,
        "--max-age-days",
        min=0,
        help="age budget for this run (default: records_max_age_days)",
    ),
) -> None:
    """Evict the oldest records past the budget now.

    `reef serve` does this periodically. Never a record a report references or a release
    cites as evidence."""
    from reef_cli.core import retention
    from reef_cli.core.config import load_settings
    from reef_cli.core.store import open_store

    settings = load_settings()
    if max_gb is None and max_age_days is None and not retention.budget_set(settings):
        typer.echo(
            "no records budget set: nothing to evict "
            "(reef config set records_max_gb 5, or pass --max-gb / --max-age-days)"
        )
        return
    store = open_store()
    try:
        gone = retention.enforce(store, settings, max_gb=max_gb, max_age_days=max_age_days)
    finally:
        store.close()
    typer.echo(f"evicted {gone.records} records ({_size(gone.bytes)})")


@contextmanager
def _bar() -> Iterator[Callable[[str, int, int], None]]:
    """A rich progress bar per kind on a terminal; silence otherwise."""
    import sys

    if not sys.stderr.isatty():
        yield lambda _kind, _done, _total: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from reef_cli.cli._output import err_console

    with Progress(
        TextColumn("{task.description:>9}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=err_console(),
    ) as progress:
        tasks: dict[str, Any] = {}

        def tick(kind: str, done: int, total: int) -> None:
            if kind not in tasks:
                tasks[kind] = progress.add_task(kind, total=total)
            progress.update(tasks[kind], completed=done, total=total)

        yield tick


@app.command("migrate")
def migrate(
    to: str = typer.Option(..., "--to", help="the database to copy into: postgresql://…"),
    source_url: str | None = typer.Option(
        None, "--from", help="the database to copy from (default: the current store)"
    ),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Copy this store into another database (SQLite into PostgreSQL).

    Records, reports, harvested sessions, jobs and marks. Idempotent and resumable: what
    the target holds already is skipped, so an interrupted run is finished by running it
    again. Stop `reef serve` first; then point it at the new database (reef config set
    database_url URL)."""
    from reef_cli.core.store import open_store
    from reef_cli.core.store.migrate import check_distinct, copy_store

    source = open_store(source_url)
    try:
        check_distinct(source.url, to)
        target = open_store(to)
        try:
            with _bar() as tick:
                result = copy_store(source, target, tick)
        finally:
            target.close()
    finally:
        source.close()
    if as_json:
        from reef_cli.cli._output import print_json

        print_json(result.to_json())
        return
    from reef_cli.cli._output import echo

    for kind, counts in result.kinds.items():
        echo(f"{kind}: {counts.copied} copied, {counts.present} already there")
    echo(f"{result.source} -> {result.target}: counts match")

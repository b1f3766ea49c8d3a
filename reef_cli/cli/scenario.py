"""`reef scenario …`: create, list, show, delete (archive) and restore scenarios."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from reef_cli.cli._common import JsonOpt, new_app

if TYPE_CHECKING:
    from reef_cli.core.scenarios import Scenario

app = new_app("Scenarios: one evolving harness each.")

NameArg = Annotated[str, typer.Argument(help="Scenario name (kebab-case).")]


def _summary(scenario: Scenario) -> dict[str, Any]:
    chain = scenario.chain()
    latest = chain.latest()
    served = chain.served() if latest else None
    return {
        "name": scenario.name,
        "description": scenario.description,
        "created_at": scenario.created_at,
        "training_mode": scenario.training_mode,
        "releases": latest.number if latest else 0,
        "latest": latest.number if latest else None,
        "served": served.number if served else None,
        "path": str(scenario.path),
    }


@app.command()
def create(
    name: NameArg,
    description: Annotated[str, typer.Option("--description", "-d", help="What it is for.")] = "",
) -> None:
    """Create a scenario with an empty release chain."""
    from reef_cli.cli._output import console, markup
    from reef_cli.core import scenarios
    from reef_cli.core.controls import check_text

    check_text("--description", description)
    scenario = scenarios.create(name, description)
    console().print(f"Created scenario [bold]{scenario.name}[/] at {markup(scenario.path)}")


@app.command("list")
def list_(
    as_json: JsonOpt = False,
    archived: Annotated[bool, typer.Option("--archived", help="List archived scenarios.")] = False,
) -> None:
    """List scenarios with their release counts."""
    from reef_cli.cli._output import console, markup, print_json
    from reef_cli.core import scenarios

    if archived:
        names = [p.name for p in scenarios.list_archived()]
        if as_json:
            print_json(names)
        else:
            for item in names or ["(no archived scenarios)"]:
                console().print(markup(item))
        return
    rows = [_summary(s) for s in scenarios.list_all()]
    if as_json:
        print_json(rows)
        return
    if not rows:
        console().print("No scenarios yet: `reef scenario create NAME`.")
        return
    from rich.table import Table

    table = Table()
    for column in ("name", "releases", "served", "created", "description"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["name"],
            str(row["releases"]),
            f"r{row['served']}" if row["served"] else "-",
            markup(row["created_at"]),
            markup(row["description"]),
        )
    console().print(table)


@app.command()
def show(name: NameArg, as_json: JsonOpt = False) -> None:
    """Show one scenario."""
    from reef_cli.cli._output import console, markup, print_json
    from reef_cli.core import scenarios

    row = _summary(scenarios.get(name))
    if as_json:
        print_json(row)
        return
    for key, value in row.items():
        console().print(f"{key + ':':<13}{markup(value)}")


@app.command()
def delete(
    name: NameArg,
    force: Annotated[
        bool, typer.Option("--force", help="archive it even while an agent is installed from it")
    ] = False,
) -> None:
    """Archive a scenario (moved aside, never destroyed; see `restore`). Refused while one
    of its jobs runs, and while an agent is installed from it unless --force."""
    from reef_cli.cli._output import console, markup
    from reef_cli.core import scenarios

    target = scenarios.delete(name, force=force)
    console().print(f"Archived scenario {name} to {markup(target)}")
    console().print(f"Undo with: reef scenario restore {markup(target.name)}")


@app.command("set")
def set_(
    name: NameArg,
    training_mode: Annotated[
        str | None,
        typer.Option(
            "--training-mode",
            help="auto: the live loop starts runs once the evidence is ready; manual: only "
            "POST /reef/train starts one; hybrid: both",
        ),
    ] = None,
    description: Annotated[
        str | None, typer.Option("--description", help="what the scenario is for")
    ] = None,
) -> None:
    """Change a scenario's training mode or description."""
    from reef_cli.cli._output import console, markup
    from reef_cli.core import scenarios

    found = scenarios.update(name, description=description, training_mode=training_mode)
    console().print(
        f"Scenario {found.name}: training mode {found.training_mode}, "
        f"description {markup(found.description or '(none)')}"
    )


@app.command()
def restore(
    archived: Annotated[str, typer.Argument(help="Archived name from `list --archived`.")],
) -> None:
    """Bring an archived scenario back."""
    from reef_cli.cli._output import console
    from reef_cli.core import scenarios

    scenario = scenarios.restore(archived)
    console().print(f"Restored scenario {scenario.name}")


@app.command()
def status(
    name: NameArg,
    recipe: Annotated[
        str | None,
        typer.Option(
            "--recipe",
            help="Count with this recipe's mark (default: the loop's last recipe, else skillclaw).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """The live loop for a scenario: what `reef serve` last saw and did (learning.json),
    and a fresh count of eligible, stale and unscored sessions made here (no server
    needed)."""
    from reef_cli.core import learning_state, scenarios
    from reef_cli.core.store import open_store

    scenario = scenarios.get(name)
    state = learning_state.load(scenario.path)
    data = learning_state.view(name, state, enabled=False, config=None)
    data.pop("enabled")  # only a running server knows; this command reads files
    config = data["config"] or {}
    mark = recipe or data["recipe"] or "skillclaw"
    staleness = config.get("max_staleness", 2) if config else 2
    served = scenario.chain().served()
    found = learning_state.count(
        open_store(),
        name,
        scenario.path,
        mark,
        served.number if served else None,
        staleness,
    )
    data["now"] = {
        "recipe": mark,
        "max_staleness": staleness,
        "served": served.number if served else None,
        "eligible": len(found.ready),
        "stale": found.stale,
        "unscored": found.unscored,
    }
    if as_json:
        from reef_cli.cli._output import print_json

        print_json(data)
        return
    _print_status(data)


def _print_status(data: dict[str, Any]) -> None:
    from reef_cli.cli._output import console, safe

    out = console()

    def line(text: str) -> None:  # messages may quote a model or a person: never markup
        out.print(safe(text), markup=False, highlight=False, soft_wrap=True)

    name, now = data["scenario"], data["now"]
    served = f"r{now['served']}" if now["served"] else "no live release"
    line(
        f"{name}: {now['eligible']} eligible, {now['stale']} stale, {now['unscored']} "
        f"unscored session(s) now (counted here with the {now['recipe']} mark, max "
        f"staleness {now['max_staleness']}, served {served})"
    )
    if not data["has_run"]:
        line(
            f"No live loop has run for {name}: start one with `reef serve --recipe "
            "skillclaw` or a `reef:` section in `reef serve -c serve.yaml` (docs/live-loop.md)."
        )
        return
    config = data["config"] or {}
    if config:
        line(
            f"live loop: {config.get('recipe')}, batch {config.get('batch_size')}, max "
            f"staleness {config.get('max_staleness')}, min interval "
            f"{float(config.get('min_interval_s') or 0):g}s, publish {config.get('publish')}"
        )
    counts = data["counts"]
    line(
        f"last check: {data['checked_at']}: {counts.get('eligible', '-')} eligible, "
        f"{counts.get('stale', '-')} stale, {counts.get('unscored', '-')} unscored"
        + (f" (error: {data['last_error']})" if data["last_error"] else "")
    )
    run = data["last_run"]
    if run:
        release = f" r{run['release']}" if run.get("release") else ""
        ended = f", ended {run['ended']}" if run.get("ended") else ""
        line(
            f"last run: {run['job']} ({run['recipe']}, {run['sessions']} session(s)), "
            f"started {run['started']}{ended}: {run['state']}{release}"
            + (f": {run['message']}" if run.get("message") else "")
        )
    else:
        line("last run: none yet")
    trigger = data["next_trigger"] or {}
    if trigger:
        line(f"next run: waits for {trigger.get('waits_for')}: {trigger.get('detail')}")


# ---------------------------------------------------------------- chain remotes

remote_app = new_app("A scenario's chain remote: share its release chain through a git URL.")
app.add_typer(remote_app, name="remote")


def _print_refs(name: str, refs: dict[str, Any], as_json: bool, head: dict[str, Any]) -> None:
    """A remote command's answer: one line per chain, or JSON (``refs`` as objects)."""
    from reef_cli.cli._output import console, print_json, safe

    if as_json:
        print_json({**head, "refs": {label: state.to_json() for label, state in refs.items()}})
        return
    for label, state in refs.items():
        if label == "weights" and state.state == "empty":
            continue  # most scenarios have no weight releases: say nothing about them
        console().print(safe(state.line(name)), markup=False, highlight=False, soft_wrap=True)


@remote_app.command("add")
def remote_add(
    name: NameArg,
    url: Annotated[str, typer.Argument(help="Any git URL: a bare repo's path, ssh, https.")],
    as_json: JsonOpt = False,
) -> None:
    """Share the scenario's chain through URL (created here if missing), then pull."""
    from reef_cli.cli._output import console, safe
    from reef_cli.core import remotes

    done = remotes.add(name, url)
    head = {k: v for k, v in done.items() if k != "refs"}
    if not as_json:
        created = " (scenario created here)" if done["created"] else ""
        replaced = f", replacing {done['replaced']}" if done["replaced"] else ""
        console().print(
            safe(f"Chain remote of {name}: {done['url']}{replaced}{created}"),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    _print_refs(name, done["refs"], as_json, head)


@remote_app.command("show")
def remote_show(name: NameArg, as_json: JsonOpt = False) -> None:
    """The scenario's remote and each chain against it, as last fetched (no network)."""
    from reef_cli.cli._output import console, safe
    from reef_cli.core import remotes

    shown = remotes.show(name)
    head = {k: v for k, v in shown.items() if k != "refs"}
    if not as_json:
        console().print(
            safe(f"remote: {shown['url']}"), markup=False, highlight=False, soft_wrap=True
        )
    _print_refs(name, shown["refs"], as_json, head)


@remote_app.command("remove")
def remote_remove(name: NameArg) -> None:
    """Forget the scenario's remote; the local chain stays as it is."""
    from reef_cli.cli._output import console, safe
    from reef_cli.core import remotes

    url = remotes.remove(name)
    console().print(
        safe(f"Removed the chain remote of {name} ({url})"),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@app.command()
def push(name: NameArg, as_json: JsonOpt = False) -> None:
    """Push local releases to the scenario's remote (refused if it moved since the last
    pull: pull first)."""
    from reef_cli.core import remotes

    _print_refs(name, remotes.push(name), as_json, {"scenario": name})


@app.command()
def pull(name: NameArg, as_json: JsonOpt = False) -> None:
    """Fetch the remote's releases and fast-forward the local chain; never rewrites local
    history (diverged chains are an error and nothing changes)."""
    from reef_cli.core import remotes

    _print_refs(name, remotes.pull(name), as_json, {"scenario": name})

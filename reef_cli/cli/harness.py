"""`reef harness …`: create, check, publish, list, show, page, export, diff, roll back, promote."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from reef_cli.cli._common import JsonOpt, RegistryHelp, ScenarioOpt, new_app, scenario_name

app = new_app("Harness trees and their release chain.")

DirArg = Annotated[Path, typer.Argument(help="A harness tree folder.")]
ReasonOpt = Annotated[str, typer.Option("--reason", "-m", help="Why (defaults to a summary).")]
ReleaseArg = Annotated[
    str, typer.Argument(help="A release: 3, r3, latest, previous, served or installed.")
]


@app.command()
def init(directory: DirArg) -> None:
    """Write a small starter tree (a rule, a skill, a command) to DIRECTORY."""
    from reef_cli.cli._output import console, markup
    from reef_cli.core.tree import starter_tree

    written = starter_tree().render(directory)
    where = markup(directory)
    console().print(f"Wrote a starter tree to [bold]{where}[/] ({len(written)} files).")
    console().print(f"Next: reef harness publish {where} --reason 'first release'")


@app.command()
def check(directory: DirArg, as_json: JsonOpt = False) -> None:
    """Validate a tree and scan it for secrets, listing every problem (publishes nothing)."""
    from reef_cli.cli._output import console, markup, print_json
    from reef_cli.core.checks import static_checks
    from reef_cli.core.config import load_settings
    from reef_cli.core.errors import TreeError
    from reef_cli.core.publishing import limits_from
    from reef_cli.core.tree import scan_folder

    limits = limits_from(load_settings())
    try:
        found = scan_folder(directory, limits)
    except TreeError as exc:  # a symlinked root (a missing one is TreeNotFound: exit 1)
        data = _blocked_tree(exc.problems)
    else:
        # Every problem in one run: the folder's (links, special files, names, sizes),
        # the parser's on the files that could be read, and the scans of those files.
        verdict = static_checks(found.files, limits)
        data = verdict.to_json()
        if found.problems:
            parsed = next(c for c in data["checks"] if c["name"] == "tree")
            later = parsed.get("findings", []) if parsed["status"] == "failed" else []
            # A SKILL.md refused by the folder check is not also "missing".
            refused_skill = {
                f"{r[: -len('SKILL.md')]}: missing SKILL.md"
                for r in found.refused
                if r.startswith("skills/") and r.endswith("/SKILL.md")
            }
            later = [p for p in later if p not in refused_skill]
            problems = found.problems + later
            parsed.update(status="failed", detail=problems[0], findings=problems)
            data["verdict"] = "blocked"
    if as_json:
        print_json(data)
    else:
        for item in data["checks"]:
            colour = {"passed": "green", "pending": "yellow"}.get(item["status"], "red")
            console().print(
                f"[{colour}]{item['status']:>7}[/] {item['name']}: "
                f"{markup(item.get('detail', ''))}",
                soft_wrap=True,
            )
            for finding in item.get("findings", [])[1 if item["name"] == "tree" else 0 :]:
                console().print(f"          - {markup(finding)}", soft_wrap=True)
    if data["verdict"] == "blocked":
        raise typer.Exit(3)


def _blocked_tree(problems: list[str]) -> dict[str, Any]:
    return {
        "verdict": "blocked",
        "checks": [
            {"name": "tree", "status": "failed", "detail": problems[0], "findings": problems}
        ],
    }


@app.command()
def publish(
    directory: DirArg,
    reason: Annotated[str, typer.Option("--reason", "-m", help="Why this release exists.")],
    scenario: ScenarioOpt = None,
    reviewed: Annotated[
        bool, typer.Option("--reviewed", help="I reviewed the extension code: publish it live.")
    ] = False,
    allow_empty: Annotated[
        bool,
        typer.Option(
            "--allow-empty",
            help="Publish an empty tree on purpose (it replaces the harness with nothing).",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Gate DIRECTORY (validation + credential scan) and publish it as the next release.

    An empty tree is refused unless it is the scenario's first release or --allow-empty."""
    from reef_cli.cli._output import console, print_json
    from reef_cli.cli._progress import scan_progress
    from reef_cli.core.controls import check_text
    from reef_cli.core.publishing import publish_dir

    check_text("--reason", reason)
    name = scenario_name(scenario)
    with scan_progress("credential scan") as tick:
        release, verdict = publish_dir(
            name,
            directory,
            reason=reason,
            reviewed=reviewed,
            allow_empty=allow_empty,
            progress=tick,
        )
    if as_json:
        print_json(release.to_json())
        return
    console().print(
        f"Published [bold]{release.tag}[/] of scenario [bold]{name}[/] ({verdict.verdict})."
    )
    if release.meta.status == "pending":
        console().print(
            f"[yellow]Pending:[/] it holds extension code; review it, then "
            f"`reef harness promote {release.number} -s {name}`."
        )


@app.command()
def versions(scenario: ScenarioOpt = None, as_json: JsonOpt = False) -> None:
    """List the scenario's releases, newest first, and the proposals waiting for review."""
    from reef_cli.cli._output import console, markup, print_json
    from reef_cli.core import proposals, scenarios

    name = scenario_name(scenario)
    found_in = scenarios.get(name)
    chain = found_in.chain()
    releases = list(reversed(chain.releases()))
    waiting = proposals.pending(found_in)
    states = proposals.states(found_in, releases)  # a pending release's real state
    if as_json:
        served = chain.served()
        print_json(
            {
                "scenario": name,
                "served": served.number if served else None,
                "releases": [proposals.release_json(r, states) for r in releases],
                "proposals": [p.to_json() for p in waiting],
            }
        )
        return
    if not releases:
        console().print(
            f"Scenario {name} has no releases yet: `reef harness publish DIR -s {name}`."
        )
        return
    from rich.table import Table

    served = chain.served()
    table = Table(title=f"Releases of {name}", title_justify="left")
    for column in ("release", "status", "source", "gate", "created", "reason"):
        table.add_column(column)
    for release in releases:
        meta = release.meta
        mark = " (served)" if served and served.number == release.number else ""
        source = meta.source + (f" → r{meta.points_to}" if meta.points_to else "")
        # cells are rich markup: every field from the chain is escaped (a pulled chain's
        # metadata is anyone's text)
        table.add_row(
            release.tag + mark,
            markup(proposals.shown_status(release, states)),
            markup(source),
            markup(meta.gate.get("verdict", "")),
            markup(meta.created_at[:19].replace("T", " ")),
            markup(meta.reason.splitlines()[0] if meta.reason else "", multiline=False),
        )
    console().print(table)
    if waiting:
        _print_proposals(name, waiting)


def _print_proposals(name: str, waiting: list[Any]) -> None:
    from reef_cli.cli._output import console, safe

    out = console()
    out.print(f"Proposals waiting for review ({len(waiting)}):", markup=False)
    for proposal in waiting:
        meta = proposal.release.meta
        why = "held for review" if proposal.held_for == "review" else "extension code"
        reason = meta.reason.splitlines()[0] if meta.reason else ""
        out.print(
            safe(f"  {proposal.release.tag} ({why}, {meta.source}): {reason}", multiline=False),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    out.print(
        f"Promote with `reef harness promote N -s {name}`, reject with "
        f"`reef harness reject N -s {name}`.",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@app.command()
def proposals(scenario: ScenarioOpt = None, as_json: JsonOpt = False) -> None:
    """List proposals: pending releases (held for review, or extension code) that nobody
    promoted or rejected yet, newest first."""
    from reef_cli.cli._output import console, print_json
    from reef_cli.core import proposals as found
    from reef_cli.core import scenarios

    name = scenario_name(scenario)
    waiting = found.pending(scenarios.get(name))
    if as_json:
        print_json({"scenario": name, "proposals": [p.to_json() for p in waiting]})
        return
    if not waiting:
        console().print(f"No proposals waiting in {name}.", markup=False)
        return
    _print_proposals(name, waiting)


@app.command()
def reject(release: ReleaseArg, scenario: ScenarioOpt = None, reason: ReasonOpt = "") -> None:
    """Reject a proposal (a pending release): it is no longer offered; the chain keeps it
    (numbers only grow) and the served release stays as it is."""
    from reef_cli.cli._output import console
    from reef_cli.core import proposals, scenarios
    from reef_cli.core.controls import check_text

    check_text("--reason", reason)
    name = scenario_name(scenario)
    entry = proposals.reject(scenarios.get(name), release, reason)
    console().print(
        f"Rejected r{entry['release']} of {name}; the served release is unchanged.",
        markup=False,
    )


@app.command()
def show(
    release: ReleaseArg = "latest", scenario: ScenarioOpt = None, as_json: JsonOpt = False
) -> None:
    """Show one release: metadata, gate verdict and files."""
    from reef_cli.cli._output import console, markup, print_json, safe
    from reef_cli.core import proposals, scenarios

    found_in = scenarios.get(scenario_name(scenario))
    chain = found_in.chain()
    found = found_in.resolve(release)
    files = chain.files(found)
    states = proposals.states(found_in)
    if as_json:
        print_json({**proposals.release_json(found, states), "files": sorted(files)})
        return
    meta = found.meta
    out = console()
    status = proposals.shown_status(found, states)
    out.print(f"[bold]{found.tag}[/]  {markup(status)}  {markup(meta.created_at)}")

    def plain(text: str) -> None:  # release text is untrusted: never markup, never controls
        out.print(safe(text), markup=False, highlight=False, soft_wrap=True)

    plain(
        f"source:  {meta.source}" + (f" (content of r{meta.points_to})" if meta.points_to else "")
    )
    if meta.recipe:
        plain(f"recipe:  {meta.recipe}")
    plain(f"reason:  {meta.reason}")
    plain(f"parent:  {('r' + str(meta.parent)) if meta.parent else '-'}")
    plain(f"hash:    {meta.content_hash}")
    plain(f"gate:    {meta.gate.get('verdict', '-')}")
    for item in meta.gate.get("checks", []):
        plain(f"   {item.get('status', ''):>7} {item.get('name', '')}: {item.get('detail', '')}")
        for finding in item.get("findings", [])[:12]:  # the numbers behind the verdict
            plain(f"           {finding}")
    extra = meta.model_dump()
    if extra.get("ask"):
        plain(f"ask:     {extra['ask']}")
    for change in extra.get("changes", []):
        plain(f"change:  {change.get('summary', '')}")
        if change.get("why"):
            plain(f"why:     {change['why']}")
    if isinstance(extra.get("evaluation"), dict):
        _print_evaluation(extra["evaluation"])
    trial = extra.get("trial")
    if trial:
        plain(
            f"trial:   {trial.get('agent')} in the {trial.get('sandbox')} sandbox, exit "
            f"{trial.get('returncode')}, {trial.get('requests')} recorded request(s), change "
            f"loaded: {trial.get('loaded')}, receipts {', '.join(trial.get('receipts', []))}"
        )
    plain(f"files ({len(files)}):")
    for path in files:
        plain(f"   {path}")


def _print_evaluation(evaluation: dict[str, Any]) -> None:
    """The gate's evaluation numbers, as the release page shows them."""
    from reef_cli.cli._output import console, markup
    from reef_cli.core.release_page import evaluation_rows

    out = console()
    out.print(f"evaluation: {markup(evaluation.get('reason', ''))}", soft_wrap=True)
    for label, text in evaluation_rows(evaluation):
        out.print(f"   {markup(label):>10}  {markup(text)}", soft_wrap=True)


@app.command()
def page(
    release: ReleaseArg = "latest",
    scenario: ScenarioOpt = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="File to write (default: ./release-<S>-<N>.html)."),
    ] = None,
) -> None:
    """Write one release as a self-contained HTML page: why, changes, verdict, evaluation
    (with its plot), feedback (the accept curve around it), trial and chain; open it in
    any browser, no network needed."""
    from reef_cli.cli._output import console
    from reef_cli.core import scenarios
    from reef_cli.core.release_page import render_page

    name = scenario_name(scenario)
    found_in = scenarios.get(name)
    found = found_in.resolve(release)
    target = output or Path(f"release-{name}-{found.number}.html")
    html = render_page(found_in, found.number)
    try:
        target.write_text(html, encoding="utf-8")
    except OSError as exc:
        from reef_cli.core.errors import ReefError

        raise ReefError(
            f"cannot write {target}: {exc.strerror}", "pass -o with a writable path"
        ) from exc
    from reef_cli.cli._output import markup

    console().print(markup(target), soft_wrap=True)


@app.command()
def export(
    release: ReleaseArg,
    directory: Annotated[Path, typer.Argument(help="An empty or new folder to write into.")],
    scenario: ScenarioOpt = None,
) -> None:
    """Write a release's tree to DIRECTORY."""
    from reef_cli.cli._output import console, markup
    from reef_cli.core import scenarios
    from reef_cli.core.tree import parse_files

    found_in = scenarios.get(scenario_name(scenario))
    chain = found_in.chain()
    found = found_in.resolve(release)
    written = parse_files(chain.files(found), where=found.tag).render(directory)
    console().print(f"Exported {found.tag} to {markup(directory)} ({len(written)} files).")


def _republish(source: str, release: str | None, scenario: str | None, reason: str) -> None:
    """Rollback or promote. A rollback goes through ``publishing.rollback``: without
    RELEASE it restores ``Chain.rollback_target``, as the API does without ``to``."""
    from reef_cli.cli._output import console
    from reef_cli.core.controls import check_text
    from reef_cli.core.publishing import republish, rollback

    check_text("--reason", reason)
    name = scenario_name(scenario)
    if source == "rollback":
        published, _ = rollback(name, release, reason=reason)
    else:
        published, _ = republish(name, release or "latest", source=source, reason=reason)
    console().print(
        f"Published [bold]{published.tag}[/] of {name} with the content of "
        f"r{published.meta.points_to} ({source})."
    )


@app.command()
def rollback(
    release: Annotated[
        str | None,
        typer.Argument(
            help="A release: 3, r3, latest, previous, served or installed. Default: the "
            "release served before the current one (the newest live release older than the "
            "served one, with other content)."
        ),
    ] = None,
    scenario: ScenarioOpt = None,
    reason: ReasonOpt = "",
) -> None:
    """Publish a new release with the content of an older one (numbers only grow)."""
    _republish("rollback", release, scenario, reason)


@app.command()
def promote(release: ReleaseArg, scenario: ScenarioOpt = None, reason: ReasonOpt = "") -> None:
    """Publish a pending (or any) release's content as a new live release."""
    _republish("promote", release, scenario, reason)


@app.command()
def diff(
    a: Annotated[
        str, typer.Argument(help="From release (default: installed if any, else previous).")
    ] = "default",
    b: Annotated[str, typer.Argument(help="To release (default: latest).")] = "latest",
    scenario: ScenarioOpt = None,
    stat: Annotated[bool, typer.Option("--stat", help="Only per-file line counts.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Show what changed between two releases, file by file."""
    from reef_cli.cli._diff_view import print_diff
    from reef_cli.cli._output import print_json
    from reef_cli.core import scenarios
    from reef_cli.core.diff import diff_trees
    from reef_cli.core.installs import installed_release

    name = scenario_name(scenario)
    found_in = scenarios.get(name)
    chain = found_in.chain()
    if a == "default":
        a = "installed" if installed_release(name) is not None else "previous"
    old, new = found_in.resolve(a), found_in.resolve(b)
    changes = diff_trees(chain.files(old), chain.files(new), old.tag, new.tag)
    if as_json:
        print_json(
            {
                "from": old.number,
                "to": new.number,
                "files": [c.to_json(with_diff=not stat) for c in changes],
                "summary": {
                    "files": len(changes),
                    "added": sum(c.added for c in changes),
                    "removed": sum(c.removed for c in changes),
                },
            }
        )
        return
    print_diff(changes, old.tag, new.tag, stat=stat)


AdapterOpt = Annotated[str, typer.Option("--adapter", "-a", help="{adapters}.")]
TargetOpt = Annotated[
    Path | None,
    typer.Option(
        "--target", help="The agent's folder (default: the agent's own, e.g. ~/.pi/agent)."
    ),
]


@app.command(cls=RegistryHelp)
def install(
    adapter: AdapterOpt,
    scenario: ScenarioOpt = None,
    release: Annotated[
        str, typer.Option("--release", "-r", help="Release to install (default: served).")
    ] = "served",
    target: TargetOpt = None,
    from_server: Annotated[
        str | None,
        typer.Option("--from", help="Fetch the release from this `reef serve` (uses $REEF_TOKEN)."),
    ] = None,
    allow_pending: Annotated[
        bool,
        typer.Option(
            "--allow-pending",
            help="Install a pending release (unreviewed extension code) anyway.",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Install a release into an agent (rules, skills, commands, extensions, routing).

    A pending release holds extension code nobody reviewed yet: it is refused unless
    --allow-pending (review it, then `reef harness promote N`)."""
    from adapters._install import install_release, install_remote
    from adapters.base import Routing
    from reef_cli.cli._output import console, markup, print_json
    from reef_cli.core import tokens
    from reef_cli.core.config import load_settings

    settings = load_settings()
    name = scenario or settings.default_scenario
    if from_server:
        token = tokens.main_token(create=False) or ""
        installed, where = install_remote(
            adapter, name, from_server, token, release, target, allow_pending=allow_pending
        )
    else:
        url = f"http://{settings.serve_host}:{settings.serve_port}"
        routing = Routing(base_url=url, scenario=name)
        installed, where = install_release(
            adapter, name, routing, release, target, allow_pending=allow_pending
        )
    if as_json:
        print_json(
            {
                "adapter": adapter,
                "scenario": name,
                "release": installed.number,
                "target": str(where),
                "latest": installed.latest,
            }
        )
        return
    console().print(
        f"Installed r{installed.number} of {name} into {markup(where)} ({markup(adapter)})."
    )


@app.command(cls=RegistryHelp)
def uninstall(adapter: AdapterOpt, target: TargetOpt = None) -> None:
    """Remove Reef's files from an agent; the agent's own files come back as they were."""
    from adapters._install import uninstall as remove
    from reef_cli.cli._output import console, markup

    where = remove(adapter, target)
    console().print(f"Removed Reef's install from {markup(where)} ({markup(adapter)}).")

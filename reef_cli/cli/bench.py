"""`reef bench`: measurements a person can rerun. `reef bench learn` plays a simulated
user (a persona) live through `reef serve` and measures what the harness learned, on
held-out prompts, against controls (docs/personas.md, docs/results.md).

A thin shell over ``recipes.learn``: only typer at module level.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import typer

from reef_cli.cli._common import JsonOpt, new_app

app = new_app("Measurements: `reef bench learn` (does Reef learn what a user wants?).")


@app.command("learn")
def learn_cmd(
    persona: str = typer.Option(
        ..., "--persona", "-p", help="A persona file, or a shipped persona's name."
    ),
    recipe: str = typer.Option(
        "skillclaw", "--recipe", help="The recipe the live loop runs (skillclaw)."
    ),
    sessions: int | None = typer.Option(
        None, "--sessions", min=1, help="Sessions to play [default: every train prompt]."
    ),
    batch_size: int = typer.Option(
        5, "--batch-size", min=1, help="Scored sessions before the live loop runs the recipe."
    ),
    plot: Path | None = typer.Option(
        None, "--plot", help="Write the accept curve and held-out scores as a PNG here."
    ),
    home: Path | None = typer.Option(
        None, "--home", help="Keep the run's state dir here [default: a temporary one]."
    ),
    as_json: JsonOpt = False,
) -> None:
    """Play a persona live through `reef serve` on the embedded model and measure it.

    Each train prompt is one session through the proxy, reported as the persona would;
    the live loop learns from the reports, and each release it publishes is served to
    the next session. Then the held-out prompts (never sent) are answered before and
    after, with an A/A, a placebo, the raw complaints and an oracle rule as controls.
    `reef bench personas` names the shipped personas.
    """
    from recipes import learn, personas
    from reef_cli.cli._output import print_json

    found = personas.resolve(persona)
    if home is not None and home.exists() and any(home.iterdir()):
        from reef_cli.core.errors import OptionInvalid

        raise OptionInvalid(f"--home {home} is not empty", "give a new or empty directory")
    options = learn.LearnOptions(
        persona=found,
        recipe=recipe,
        sessions=sessions,
        batch_size=batch_size,
        home=home,
        plot=plot,
        command="reef bench learn " + " ".join(sys.argv[3:]),
    )
    learn.check_options(options)
    with _bar() as progress:
        result = learn.run(options, progress)
    if as_json:
        print_json(result)
        return
    _print(result)


@app.command("personas")
def personas_cmd(as_json: JsonOpt = False) -> None:
    """The shipped personas (simulated users), with what each prefers."""
    from recipes import personas
    from reef_cli.cli._output import echo, print_json

    rows = []
    for name, path in personas.shipped().items():
        found = personas.load(path)
        rows.append({"name": name, "description": " ".join(found.description.split())})
    if as_json:
        print_json(rows)
        return
    for row in rows:
        echo(f"{row['name']:<22} {row['description']}")


@contextlib.contextmanager
def _bar() -> Iterator[Callable[[str, int, int, str], None]]:
    """A rich progress bar for sessions, then evaluation; silent when not a terminal."""
    if not sys.stderr.isatty():
        yield lambda *_: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

    from reef_cli.cli._output import err_console

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
        console=err_console(),
        transient=True,
    ) as shown:
        tasks: dict[str, TaskID] = {}

        def update(phase: str, done: int, total: int, detail: str) -> None:
            if phase not in tasks:
                tasks[phase] = shown.add_task(phase, total=total, detail="")
            shown.update(tasks[phase], completed=done, total=total, detail=detail)

        yield update


def _print(result: dict[str, Any]) -> None:
    from reef_cli.cli._output import echo

    curve = "".join("✓" if x else "·" for x in result["accept_curve"])
    adapted = result["sessions_to_adaptation"]
    echo(f"persona {result['persona']}, recipe {result['recipe']}, model {result.get('model')}")
    echo(
        f"sessions  {curve}  adapted at session {adapted}"
        if adapted
        else f"sessions  {curve}  not adapted"
    )
    for release in result["releases"]:
        echo(f"  r{release['number']} went live after session {release['after_session']}")
    n = result["heldout"]["prompts"]
    echo(f"held-out prompts: {n}")
    rows = [("after", result["heldout"]), *result["controls"].items()]
    for name, numbers in rows:
        parts = []
        for measure in ("strict", "lenient"):
            m = numbers[measure]
            low, high = m["diff_ci"]
            parts.append(
                f"{measure} {m['before']:.2f}→{m['after']:.2f} Δ {m['diff']:+.2f} "
                f"[{low:+.2f}, {high:+.2f}]"
            )
        echo(f"  {name:<13} " + "   ".join(parts))
    if result.get("plot"):
        echo(f"plot: {result['plot']}")

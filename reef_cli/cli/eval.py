"""`reef eval`: score releases on a task set, with intervals, a paired comparison and a plot."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from reef_cli.cli._common import JsonOpt, NoCacheOpt, ScenarioOpt, scenario_name

if TYPE_CHECKING:
    from recipes.tasks.eval_releases import EvalReport


def eval_releases(
    tasks: Annotated[
        Path, typer.Option("--tasks", "-t", help="Task set (YAML or JSONL); its test split runs.")
    ],
    releases: Annotated[
        str,
        typer.Option(
            "--releases",
            "-r",
            help="Releases, comma-separated: 1,latest / r2,r3 / 1,1 (an A/A check). "
            "Each is compared with the first.",
        ),
    ],
    scenario: ScenarioOpt = None,
    adapter: Annotated[
        str,
        typer.Option("--adapter", "-a", help="Agent that runs tasks when the set names no runner."),
    ] = "pi",
    model: Annotated[
        str | None,
        typer.Option("--model", help="LiteLLM model string (default: configured or embedded)."),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Also write a PNG of the means and intervals (reef[tasks])."),
    ] = None,
    no_cache: NoCacheOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Score releases on a task set's held-out split, each with a 95% interval, and
    compare each with the first by the gate's own paired rule (sign test or bootstrap).

    The numbers are the ones the gate would give for the same tasks and seed: releases x
    tasks x repeats runs, through the task set's runner (direct: one model call each)."""
    from recipes import engine
    from recipes import tasks as task_sets
    from recipes.tasks.eval_releases import clients, evaluate_releases, held_out, parse_releases
    from reef_cli.core import scenarios
    from reef_cli.core.plots import require_matplotlib

    found = scenarios.get(scenario_name(scenario))  # unknown scenario: before any model loads
    task_set = task_sets.for_scenario(found, tasks)  # a missing file: says so
    assert task_set is not None  # an explicit file is loaded or refused, never skipped
    test = held_out(task_set)
    numbers = parse_releases(found, releases)
    if plot is not None:
        require_matplotlib("reef eval --plot")  # say so before the runs, not after
    client, judge = clients(model, cache=not no_cache)
    with engine.runners(found.name, adapter, test, client, judge, trials=False) as (
        _trial,
        task_runner,
        about,
        _agent,
    ):
        assert task_runner is not None  # trials=False always gives a task runner
        with _bar(len(numbers) * len(test.tasks) * test.repeats, disabled=as_json) as tick:
            report = evaluate_releases(
                found,
                test,
                numbers,
                task_runner,
                progress=tick,
                about={**about, "model": client.describe()},
            )
    data = report.to_json()
    data["answers_reused"] = client.reused + (judge.reused if judge is not client else 0)
    if plot is not None:
        from reef_cli.core.plots import eval_plot

        eval_plot(data, plot)
    if as_json:
        from reef_cli.cli._output import print_json

        print_json({**data, **({"plot": str(plot)} if plot else {})})
        return
    _print_table(report)
    if data["answers_reused"]:
        from reef_cli.cli._output import console

        console().print(
            f"{data['answers_reused']} answer(s) reused from the answer cache (the embedded "
            "model's earlier answers at temperature 0); --no-cache asks again"
        )
    if plot is not None:
        from reef_cli.cli._output import console, markup

        console().print(f"Plot written to {markup(plot)}")


class _bar:
    """A rich progress bar on stderr that advances once per task run."""

    def __init__(self, total: int, disabled: bool) -> None:
        self.total = total
        self.disabled = disabled

    def __enter__(self) -> Any:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        from reef_cli.cli._output import err_console

        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=err_console(),
            transient=True,
            disable=self.disabled,
        )
        self.progress.__enter__()
        self.task = self.progress.add_task("evaluating", total=self.total)

        from reef_cli.cli._output import markup

        def tick(message: str, fraction: float | None = None) -> None:
            done = round((fraction or 0.0) * self.total)  # the description is markup
            self.progress.update(self.task, description=markup(message), completed=done)

        return tick

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)


def _ci(values: list[float] | None, sep: str = " ") -> str:
    return f"{sep}[{values[0]:.3f}, {values[1]:.3f}]" if values else ""


WIDE = 110  # narrower terminals get each interval on the line below its value


def _print_table(report: EvalReport) -> None:
    """The report as a table, then each comparison's verdict in the gate's own words."""
    from rich import box
    from rich.table import Table

    from reef_cli.cli._output import console
    from reef_cli.cli._output import markup as escape

    out = console()
    sep = " " if out.width >= WIDE else "\n"
    data = report.to_json()
    lenient = any(r["lenient"] for r in data["releases"])
    title = (
        f"{report.scenario}: {report.task_set or 'task set'}, test split, {report.repeats} "
        f"repeat(s), {report.method} rule vs r{report.baseline}"
    )
    table = Table(title=escape(title), title_justify="left", box=box.SIMPLE_HEAD)
    columns = ["release", "mean [95% CI]", "n", "invalid", f"Δ vs r{report.baseline} [95% CI]"]
    columns += ["W/L/T", "p"]
    if lenient:
        columns.insert(2, "lenient [95% CI]")
    for column in columns:
        table.add_column(
            column,
            justify="left" if column == "release" else "right",
            no_wrap=sep == " " and "CI" in column,  # an interval reads as one piece
        )

    def scored(mean: float | None, ci: list[float] | None, signed: bool = False) -> str:
        if mean is None:
            return "-"
        return (f"{mean:+.3f}" if signed else f"{mean:.3f}") + _ci(ci, sep)

    for entry in data["releases"]:
        row = [entry["tag"], scored(entry["mean"], entry["ci95"])]
        if lenient:
            found = entry["lenient"] or {}
            row.append(scored(found.get("mean"), found.get("ci95")))
        row += [str(entry["tasks"]), str(entry["invalid"])]
        numbers = entry["vs_first"]
        if numbers is None:
            row += ["baseline", "", ""]
        else:
            row.append(scored(numbers.get("mean_diff"), numbers.get("diff_ci95"), signed=True))
            if "wins" in numbers:
                row.append(f"{numbers['wins']}/{numbers['losses']}/{numbers['ties']}")
                row.append(f"{numbers['p']:.3f}")
            else:
                row += ["-", "-"]
        table.add_row(*row)
    out.print(table)
    for entry in data["releases"][1:]:
        verdict = entry["verdict"]
        colour = {"passed": "green", "invalid": "yellow"}.get(verdict["status"], "default")
        out.print(
            f"[{colour}]{entry['tag']} vs r{verdict['against']}:[/] {escape(verdict['reason'])}",
            soft_wrap=True,
        )

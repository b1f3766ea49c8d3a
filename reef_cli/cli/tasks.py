"""`reef tasks`: the shipped task sets and how to make a task-set file from one.

A thin shell over ``recipes.tasks.sources``: only typer at module level, the generators
(and yaml, pydantic) load inside the commands.
"""

from __future__ import annotations

from pathlib import Path

import typer

from reef_cli.cli._common import JsonOpt, RegistryHelp, new_app

app = new_app("Task sets: list the shipped ones, make a task-set file, show what one holds.")


@app.command("list")
def list_cmd(as_json: JsonOpt = False) -> None:
    """The shipped task sets, whether each is installed, and what to install if not."""
    from recipes.tasks.sources import SOURCES
    from reef_cli.cli._output import echo, print_json

    rows = [s.as_dict() for s in SOURCES.values()]
    if as_json:
        print_json(rows)
        return
    for row in rows:
        if row["unavailable"]:
            state = f"unavailable: {row['unavailable']}"
        elif row["installed"]:
            state = "installed"
        else:
            state = f"not installed: {row['install']}"
        echo(f"{row['name']:<15} {state}\n{'':<15} {row['description']}")


@app.command("make", cls=RegistryHelp)
def make_cmd(
    source: str = typer.Argument(
        ..., help="The task set: {task_sources}; `reef tasks list` says which are installed."
    ),
    output: Path = typer.Option(..., "--output", "-o", help="The task-set file to write."),
    datasets: str | None = typer.Option(
        None, "--datasets", help="reasoning-gym only: comma-separated dataset names."
    ),
    train: int | None = typer.Option(
        None, "--train", help="Train tasks (default: {task_sizes_train})."
    ),
    val: int | None = typer.Option(None, "--val", help="Val tasks (default: {task_sizes_val})."),
    test: int | None = typer.Option(
        None, "--test", help="Test tasks (default: {task_sizes_test})."
    ),
    seed: int = typer.Option(1, "--seed", help="Same seed, same file."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
) -> None:
    """Write a task-set file: `reef tasks make reasoning-gym --datasets chain_sum -o T.yaml`.

    Sizes count a split's tasks in all (reasoning-gym shares them evenly among the
    datasets); no question is in two splits, and the same seed writes the same file.
    """
    from recipes.tasks import sources
    from recipes.tasks.sources import writer

    sources.require(source)
    writer.check_target(output, force)  # before the work, not after it
    names = datasets.split(",") if datasets is not None else None
    made = sources.make(source, datasets=names, train=train, val=val, test=test, seed=seed)
    writer.write(output, writer.dump(made), force)
    from reef_cli.cli._output import echo

    counts = ", ".join(f"{n} {split}" for split, n in made.counts().items())
    echo(f"wrote {output}: {counts}")


@app.command("show")
def show_cmd(
    path: Path = typer.Argument(..., help="A task-set file (YAML or JSONL)."),
    as_json: JsonOpt = False,
) -> None:
    """What a task-set file holds: name, runner, split counts, scorer and lenient kinds."""
    from collections import Counter

    from recipes.tasks import load
    from reef_cli.cli._output import echo, safe

    tasks = load(path)
    splits = tasks.counts()
    scorers = dict(Counter(t.kind for t in tasks.tasks))
    lenient = dict(Counter(t.lenient.kind if t.lenient else "none" for t in tasks.tasks))
    if as_json:
        from reef_cli.cli._output import print_json

        print_json(
            {
                "file": str(path),
                "name": tasks.name,
                "runner": tasks.runner,
                "splits": splits,
                "scorers": scorers,
                "lenient": lenient,
                "source": tasks.source,
            }
        )
        return

    def kinds(counted: dict[str, int]) -> str:
        return ", ".join(f"{k} {n}" for k, n in counted.items())

    runner = tasks.runner or "unset (the job's agent)"
    # a task set's name, runner and source are the file's text: spelled out, one line each
    one = {"name": tasks.name or "-", "runner": runner, "path": str(path)}
    one = {k: safe(v, multiline=False) for k, v in one.items()}
    echo(f"file     {one['path']}\nname     {one['name']}\nrunner   {one['runner']}")
    if tasks.source:
        made_by = " ".join(str(tasks.source.get(k, "")) for k in ("generator", "version"))
        seed = tasks.source.get("seed", "-")
        echo(f"source   {safe(made_by.strip() or '-', multiline=False)}, seed {safe(seed)}")
    echo(f"splits   {kinds(splits)}\nscorers  {kinds(scorers)}\nlenient  {kinds(lenient)}")

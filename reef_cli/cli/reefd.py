"""`reefd`: start, status and stop the GPU daemon; train with no engine (the cold start);
list and roll back weight releases.

A thin shell over ``reefd.daemon``, ``reefd.learner``, ``reefd.state`` and
``reefd.weights``. Nothing here imports torch: `reefd --help` and `reefd status` work
without the ``reef[reefd]`` extra, and `reefd start` or `reefd train` without it is one
line naming the install (exit 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from reef_cli.cli._common import JsonOpt
from reef_cli.cli.main import ReefGroup

app = typer.Typer(
    name="reefd",
    cls=ReefGroup,
    help="reefd: train the served model from scored records and hot-swap its weights behind "
    "Reef's proxy (docs/reefd.md).",
    no_args_is_help=True,
    rich_markup_mode=None,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.command()
def start(
    config_file: Path = typer.Option(
        Path("reefd.yaml"), "-c", "--config", help="the daemon's settings (docs/reefd.md)"
    ),
) -> None:
    """Launch (or attach) the engine, serve it through Reef's proxy, train and swap weights.

    Runs in the foreground until SIGTERM or Ctrl-C (`reefd stop` from another shell)."""
    from reefd import daemon
    from reefd import daemon_config as config

    _ready_to_train(
        "reefd already runs here (pid {pid})",
        "stop it with `reefd stop`, or use another REEF_HOME",
    )
    daemon.run(config.load(config_file))


def _ready_to_train(running_message: str, hint: str) -> None:
    """torch and transformers importable (a machine without the extra learns it before
    anything is read) and no reefd running on this state dir (``{pid}``: its pid)."""
    from reef_cli.core.errors import ServeError
    from reefd import state
    from reefd._torch import require

    require("torch")
    require("transformers")
    running = state.status()
    if running.get("running"):
        raise ServeError(running_message.format(pid=running.get("pid")), hint)


@app.command()
def train(
    config_file: Path = typer.Option(
        Path("reefd.yaml"), "-c", "--config", help="the daemon's settings (docs/reefd.md)"
    ),
    json_out: JsonOpt = False,
) -> None:
    """Train on the records already accepted and publish a weight release, with no engine.

    The cold start (docs/sft.md): one round of reefd.yaml's recipe (`sft`: supervised
    fine-tuning on answers reports accepted) on what is eligible now, gated like every
    round; the next `reefd start` serves the release. Exits 3 when the gate does not
    pass the candidate."""
    from reef_cli.cli._output import console, markup, print_json
    from reef_cli.core.errors import EvaluationInvalid, GateBlocked
    from reefd import daemon_config as config
    from reefd import learner

    _ready_to_train(
        "reefd runs here (pid {pid}) and trains in its own rounds",
        "stop it with `reefd stop` first, or let it train (recipe in its reefd.yaml)",
    )
    settings = config.load(config_file)
    result = learner.train(settings)
    if json_out:
        print_json(result.to_json())
    if result.state == "rejected":
        raise GateBlocked(
            f"train rejected: {result.reason}",
            "the batch is spent; train again once new answers are accepted, or change "
            "trainer.lr / trainer.epochs",
        )
    if result.state != "published":
        raise EvaluationInvalid(
            f"train invalid: {result.reason}", "nothing was spent: run `reefd train` again"
        )
    if not json_out:
        console().print(
            markup(f"published {result.release} of {settings.scenario}: {result.reason}")
        )


@app.command()
def status(json_out: JsonOpt = False) -> None:
    """Whether reefd runs here: engine, weight version, consistency, the last round."""
    from reef_cli.cli._output import console, markup, print_json
    from reefd import state

    info = state.status()
    if json_out:
        print_json(info)
    else:  # reasons and URLs come from the daemon's state file: escaped
        console().print(markup(_status_text(info)), soft_wrap=True)
    if not info.get("running"):
        raise typer.Exit(1)


def _status_text(info: dict[str, Any]) -> str:
    if not info.get("running"):
        return "reefd: not running"
    engine = info.get("engine") or {}
    lines = [
        f"reefd: running (pid {info.get('pid')}), proxy {info.get('proxy')}",
        f"engine: {engine.get('kind')} at {engine.get('url')}, weights "
        f"{engine.get('weight_version')}"
        + (
            ""
            if engine.get("consistent")
            else " — INCONSISTENT: " + str(engine.get("inconsistent_reason"))
        ),
        f"recipe: {info.get('recipe')} (sync {info.get('sync')}), rounds {info.get('rounds')}, "
        f"published {info.get('published')}",
        "records: " + ", ".join(f"{k} {v}" for k, v in sorted((info.get("counts") or {}).items())),
    ]
    last = info.get("last") or {}
    if last:
        lines.append(f"last round: {last.get('state')} — {last.get('reason', '')}")
    return "\n".join(lines)


@app.command()
def stop() -> None:
    """Stop the daemon of this state dir (its engine and proxy stop with it)."""
    from reef_cli.cli._output import console
    from reefd import state

    if state.stop():
        console().print("reefd: stopped")
    else:
        console().print("reefd: not running")


@app.command()
def versions(
    scenario: str = typer.Option("default", "--scenario", help="the scenario's weight chain"),
    json_out: JsonOpt = False,
) -> None:
    """The weight releases (w1, w2, …) of a scenario, oldest first."""
    from reef_cli.cli._output import console, markup, print_json
    from reefd.weights import WeightChain

    chain = WeightChain.for_scenario(scenario)
    releases = chain.releases()
    if json_out:
        print_json([r.to_json() for r in releases])
        return
    if not releases:
        console().print(f"{scenario}: no weight releases yet (the base weights are served)")
        return
    for r in releases:
        gate = r.meta.gate or {}
        console().print(
            markup(f"{r.tag}  {r.meta.created_at}  {r.meta.source}  {gate.get('verdict', '')}")
        )


@app.command()
def rollback(
    number: int = typer.Argument(..., help="the weight release to serve again (w<N>: N)"),
    scenario: str = typer.Option("default", "--scenario", help="the scenario's weight chain"),
) -> None:
    """Republish weight release N as a new release; a running reefd swaps it in."""
    from reef_cli.cli._output import console
    from reefd.weights import WeightChain

    release = WeightChain.for_scenario(scenario).rollback(number, reason=f"rollback to w{number}")
    console().print(f"{release.tag}: the weights of w{number}, served by reefd within a round")


def run() -> None:
    app(prog_name="reefd")

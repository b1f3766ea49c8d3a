"""Issue 23 item 5: what a person's terminal shows is safe (class: control characters from
data).

A release chain, records, a report, a harvested session, the live loop's state and a
hand-edited tokens.json are seeded with a hostile string in every field: an OSC retitle
(``ESC ]0;…BEL``), a clear (``ESC [2J``), a C1 ``CSI``, bidi overrides and rich markup
(``[bold red]MARK[/] [/]``; the stray ``[/]`` crashes rich if read as markup). Then every
command of the typer apps (`reef`, `reefd`, a wrapper), enumerated from the apps so a new
command is run too, runs against that state, with and without ``--json`` and once with
hostile arguments: no output may carry a raw control character, and markup must print as
itself. Plus the input side: reasons with control characters or past 2,000 characters are
refused (exit 2) by the CLI, and with a 400 naming the field by the API.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from reef_cli.cli import _output
from reef_cli.cli.main import app as reef_app
from reef_cli.core.controls import CONTROLS, visible

H = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202eevil\u2066 [bold red]MARK[/] [/]\x7f\x1b[0m"
ALLOWED = {ord("\n"), ord("\t")}
runner = CliRunner()


def raw_controls(text: str) -> list[str]:
    """The control characters in ``text`` a terminal would act on (line breaks aside)."""
    return sorted({f"U+{ord(c):04X}" for c in text if ord(c) in CONTROLS - ALLOWED})


def test_visible_spells_out_every_control_and_keeps_the_rest() -> None:
    shown = visible(H)
    assert raw_controls(shown) == []
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u202eevil\\u2066" in shown
    assert visible("a\nb\tc é 中") == "a\nb\tc é 中"
    assert visible("a\nb\tc", multiline=False) == "a\\x0ab\\x09c"


@dataclass
class Seeded:
    tmp: Path
    receipt: str
    tree: Path
    archived: str


def _seed(tmp: Path) -> Seeded:
    """Hostile text in every field a command prints, written the way other paths write
    it (a pulled chain, a recipe, the proxy, a harvest, a hand edit): not through the CLI,
    which now refuses it."""
    from reef_cli.core import learning_state, scenarios, tokens
    from reef_cli.core.checks import Check
    from reef_cli.core.publishing import publish_files, republish
    from reef_cli.core.records import HarvestedSession
    from reef_cli.core.reports import parse_report, save_report
    from reef_cli.core.store import open_store
    from reef_cli.core.tree import starter_tree
    from tests.fakes.records import chat_answer, chat_record

    scenario = scenarios.create("demo", H)
    scenarios.create("victim", H)
    scenarios.create("gone", H)
    archived = scenarios.delete("gone").name
    files = dict(starter_tree().files())
    rule = next(p for p in files if p.startswith("rules/"))
    extra = {
        "ask": H,
        "changes": [{"summary": H, "why": H}],
        "evaluation": {"reason": H, "method": H},
        "trial": {"agent": H, "sandbox": H, "receipts": [H], "loaded": H},
    }
    checks = [Check("hostile", "passed", H, [H, H])]
    publish_files(scenario, files, reason=H, extra=extra, extra_checks=checks)
    files[rule] += f"\n{H}\n"
    publish_files(scenario, files, reason=H + "\nsecond line " + H, extra=extra)
    files[rule] += f"\nmore {H}\n"
    publish_files(scenario, files, reason=H, hold="review")
    republish("demo", "1", source="rollback", reason=H)

    store = open_store()
    record = chat_record(
        "demo",
        {"model": H, "messages": [{"role": "user", "content": H}]},
        chat_answer(H),
        session_id=H,
        model=H,
        status=200,
        error=H,
    )
    store.insert(record)
    save_report(store, parse_report({"references": [record.id], "feedback": H}), "demo")
    store.upsert_harvested(
        [
            HarvestedSession(
                agent=H,
                session_id="s-hostile",
                path=H,
                record_session_id=H,
                cwd=H,
                model=H,
                started_at=H,
                ended_at=H,
                turns=[{"role": H}],
                skills_used=[H],
                receipts=[record.id],
            )
        ]
    )
    store.close()

    state = learning_state.LearningState(
        scenario="demo",
        recipe=H,
        checked_at=H,
        counts={"eligible": H, "stale": H, "unscored": H},
        last_run=learning_state.LastRun(job=H, recipe=H, started=H, message=H, state=H),
        next_trigger={"waits_for": H, "detail": H},
        last_error=H,
        config={"recipe": H, "batch_size": H, "publish": H},
    )
    learning_state.save(scenario.path, state)

    tokens.create_scoped("old", ["demo"])
    data = json.loads(tokens.tokens_path().read_text())
    data["tokens"].append({"name": H, "sha256": "00" * 32, "scenarios": [H]})
    tokens.tokens_path().write_text(json.dumps(data))

    tree = tmp / "tree"
    starter_tree().render(tree)
    (tree / rule).write_text((tree / rule).read_text() + f"\n{H}\n")
    return Seeded(tmp, record.id, tree, archived)


# What each argument and required option gets, by parameter name; a command that cannot
# run against local state is in SKIP with the reason.
def _fills(seeded: Seeded) -> dict[str, str]:
    return {
        "name": "demo",
        "release": "latest",
        "directory": str(seeded.tree),
        "receipt": seeded.receipt,
        "session": "s-hostile",
        "key": "default_scenario",
        "value": "demo",
        "a": "1",
        "b": "latest",
        "archived": seeded.archived,
        "path": str(seeded.tree / "missing-tasks.yaml"),
        "adapter": "pi",
        "reason": "a plain reason",
        "number": "1",
    }


SKIP = {
    "reef serve": "runs a server in the foreground (its banner goes through _output.echo)",
    "reef serve stop": "stops a server this test does not run",
    "reef evolve": "needs a model (its outcome lines: test_outcome_lines_are_escaped)",
    "reef quickstart": "needs a model and installs an agent",
    "reef eval": "needs a model and a task set",
    "reef bench learn": "needs a model and runs a reef serve (what it prints is numbers and "
    "the persona's name, which the persona format limits to a-z, 0-9 and hyphens)",
    "reef hook": "agent-facing JSON on stdout (adapters/_hook.py spells the text out)",
    "reef sandbox run": "passes the sandboxed command's own output through, like exec",
    "reef model install": "downloads wheels",
    "reef records migrate": "needs a second database",
    "reef tasks make": "needs the task-set extras and writes a generated file",
    "reef scenario remote add": "needs a git remote",
    "reef scenario push": "needs a git remote",
    "reef scenario pull": "needs a git remote",
    "reefd start": "needs torch and a GPU engine",
    "reefd rollback": "needs a weight release",
    "reef-pi install": "starts a reef serve",
    "reef-pi report": "starts a reef serve",
    "reef-pi evolve": "starts a reef serve",
}
# Commands that change what later commands see run last, in this order.
LAST = ["reef scenario delete", "reef token revoke", "reef harness uninstall"]
EXTRA = {  # required options and targets the name table cannot guess
    "reef harness publish": ["-m", "a plain reason"],
    "reef harness page": ["-o", "{tmp}/page.html"],
    "reef harness export": [],
    "reef harness install": ["--adapter", "pi", "--target", "{tmp}/agent"],
    "reef harness uninstall": ["--adapter", "pi", "--target", "{tmp}/agent"],
    "reef report": ["--last", "-m", H],
    "reef records evict": ["--max-gb", "100"],
    "reef sessions harvest": ["--target", "{tmp}/no-agent"],
}
ARGUMENT_OVERRIDE = {  # commands whose arguments differ from the shared names
    "reef harness export": ["latest", "{tmp}/export"],
    "reef scenario delete": ["victim"],
    "reef token create": ["fresh"],
    "reef token revoke": ["old"],
    "reef model use": ["no-such-model"],
}


def _apps() -> dict[str, typer.Typer]:
    from reef_cli.cli.reefd import app as reefd_app
    from reef_cli.cli.wrappers import Wrapper

    return {"reef": reef_app, "reefd": reefd_app, "reef-pi": Wrapper("pi", "reef-pi").app()}


def _commands() -> Iterator[tuple[str, str, Any]]:
    """(program, command path, click command) for every command of every app."""
    for prog, app in _apps().items():
        for path, command in _leaves(prog, typer.main.get_command(app)):
            yield prog, path, command


def _leaves(prefix: str, command: Any) -> Iterator[tuple[str, Any]]:
    if hasattr(command, "commands"):  # a group (typer ships its own click)
        if command.callback is not None and command.invoke_without_command:
            yield prefix, command  # `reef token`, `reef serve`: the group itself runs
        for name, sub in command.commands.items():
            yield from _leaves(f"{prefix} {name}", sub)
    else:
        yield prefix, command


def _arguments(path: str, command: Any, fills: dict[str, str]) -> list[str] | None:
    """Arguments that let ``command`` run against the seeded state, or None if one
    cannot be guessed (the test then fails: add the command to a table above)."""
    if path in ARGUMENT_OVERRIDE:
        args = list(ARGUMENT_OVERRIDE[path])
    else:
        args = []
        for param in command.params:
            if param.param_type_name == "argument" and param.required:
                if param.name not in fills:
                    return None
                args.append(fills[param.name])
    names = {p.name for p in command.params}
    if "scenario" in names and path not in ("reef scenario push", "reef scenario pull"):
        args += ["-s", "demo"]
    args += EXTRA.get(path, [])
    for param in command.params:
        if param.param_type_name == "option" and param.required and not set(param.opts) & set(args):
            return None
    return args


def _invoke(prog: str, args: list[str]) -> Any:
    return runner.invoke(_apps()[prog], args, prog_name=prog, catch_exceptions=True)


def _problem(result: Any) -> str | None:
    """What is wrong with a command's output, or None."""
    output = result.output
    if raw_controls(output):
        return f"raw control characters {raw_controls(output)} in {output!r}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return f"crashed: {type(result.exception).__name__}: {result.exception}"
    if "Traceback" in output:
        return f"a traceback: {output}"
    # markup in data prints as itself (interpreted, "[bold red]" would vanish)
    if output.count("MARK") != output.count("[bold red]MARK[/]"):
        return f"markup interpreted: {output!r}"
    return None


def _check_output(label: str, result: Any) -> None:
    problem = _problem(result)
    assert problem is None, f"{label}: {problem}"


@pytest.fixture
def seeded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reef_home: Path) -> Iterator[Seeded]:
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "2000")  # no table wraps a hostile cell apart
    monkeypatch.setattr(_output, "_console", None)
    monkeypatch.setattr(_output, "_err_console", None)
    monkeypatch.chdir(tmp_path)  # commands given hostile paths write here
    yield _seed(tmp_path)


def test_every_printing_command_shows_hostile_data_safely(seeded: Seeded) -> None:
    fills = _fills(seeded)
    commands = list(_commands())
    order = {path: i for i, path in enumerate(LAST)}
    commands.sort(key=lambda item: order.get(item[1], -1))
    ran, unplanned, problems = [], [], []
    for prog, path, command in commands:
        if path in SKIP:
            continue
        args = _arguments(path, command, fills)
        if args is None:
            unplanned.append(path)
            continue
        args = [a.replace("{tmp}", str(seeded.tmp)) for a in args]
        words = path.split()[1:]
        runs = [args]
        if any(p.name in ("as_json", "json_out") for p in command.params):
            runs.append([*args, "--json"])
        for run in runs:
            problem = _problem(_invoke(prog, [*words, *run]))
            if problem:
                problems.append(f"{path} {run}: {problem}")
            ran.append(path)
        # the same command with every argument hostile: errors quote it, safely
        hostile = [H if a in fills.values() else a for a in args]
        if hostile != args and path not in LAST:
            problem = _problem(_invoke(prog, [*words, *hostile]))
            if problem:
                problems.append(f"{path} (hostile arguments): {problem}")
    assert unplanned == [], f"add these commands to the tables of this test: {unplanned}"
    print(f"{len(set(ran))} commands, {len(ran)} runs")
    assert problems == [], "\n".join(problems)
    for needed in (
        "reef harness versions",
        "reef harness show",
        "reef records list",
        "reef sessions show",
        "reef scenario status",
        "reef token list",
        "reef-pi versions",
        "reef report",
    ):
        assert needed in ran, needed


def test_every_planned_command_exists() -> None:
    """The tables name real commands (a renamed one must not leave a stale skip)."""
    known = {path for _, path, _ in _commands()}
    stale = [p for p in [*SKIP, *EXTRA, *ARGUMENT_OVERRIDE, *LAST] if p not in known]
    assert stale == []


def test_hostile_release_prints_escaped_in_versions_and_show(seeded: Seeded) -> None:
    """The issue's sample: the reason is there, spelled out, and markup prints as text."""
    for args in (["harness", "versions", "-s", "demo"], ["harness", "show", "1", "-s", "demo"]):
        result = runner.invoke(reef_app, args)
        assert result.exit_code == 0, result.output
        assert "\\x1b]0;pwned\\x07\\x1b[2J" in result.output
        assert "[bold red]MARK[/] [/]" in result.output
        assert raw_controls(result.output) == []


def test_outcome_lines_are_escaped(seeded: Seeded, capsys: pytest.CaptureFixture[str]) -> None:
    """`reef evolve`'s outcome lines (skipped above: it needs a model) quote the model."""
    from recipes.engine import Outcome
    from reef_cli.cli._evolve_run import _print_outcome

    for state in ("published", "rejected", "unchanged"):
        outcome = Outcome(state=state, message=H, release=2, evidence={"trial": {"agent": H}})
        _print_outcome(outcome, "demo")
    out = capsys.readouterr()
    text = out.out + out.err
    assert raw_controls(text) == [] and text.count("MARK") == text.count("[bold red]MARK")


@pytest.mark.parametrize(
    "args",
    [
        ["harness", "publish", "{tree}", "-s", "demo", "-m", H],
        ["harness", "rollback", "1", "-s", "demo", "-m", H],
        ["harness", "promote", "1", "-s", "demo", "-m", H],
        ["harness", "reject", "3", "-s", "demo", "-m", H],
        ["harness", "rollback", "1", "-s", "demo", "-m", "x" * 2001],
        ["scenario", "create", "new-one", "-d", "\u202eevil"],
    ],
    ids=["publish", "rollback", "promote", "reject", "too-long", "description"],
)
def test_cli_refuses_control_characters_in_reasons(seeded: Seeded, args: list[str]) -> None:
    from reef_cli.core import scenarios

    before = len(scenarios.get("demo").chain().releases())
    args = [a.replace("{tree}", str(seeded.tree)) for a in args]
    result = runner.invoke(reef_app, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("reef: error:"), result.output
    assert "--reason" in lines[0] or "--description" in lines[0]
    assert raw_controls(result.output) == []
    assert len(scenarios.get("demo").chain().releases()) == before  # nothing published
    assert "new-one" not in [s.name for s in scenarios.list_all()]


def test_cli_takes_a_multi_line_reason_of_2000_characters(seeded: Seeded) -> None:
    reason = "why:\n\t" + "x" * 1994
    result = runner.invoke(reef_app, ["harness", "rollback", "1", "-s", "demo", "-m", reason])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        ("/reef/scenarios/demo/rollback", {"to": 1, "reason": H}, "reason"),
        ("/reef/scenarios/demo/promote", {"release": 1, "reason": "ok\x9b2J"}, "reason"),
        ("/reef/scenarios/demo/rollback", {"to": 1, "reason": "x" * 2001}, "reason"),
        ("/reef/scenarios", {"name": "fresh", "description": "a\u202eb"}, "description"),
    ],
    ids=["rollback-escape", "promote-c1", "rollback-too-long", "scenario-bidi"],
)
def test_api_refuses_control_characters_from_a_scoped_token(
    seeded: Seeded, route: str, body: dict[str, Any], field: str
) -> None:
    """The issue's sample came in through the API with a scoped token: a 400 naming the
    field, nothing published."""
    import httpx

    from reef_cli.core import scenarios, tokens
    from reef_cli.server.app import create_app
    from reef_cli.server.serve_config import ServeConfig
    from tests.fakes.server_thread import ServerThread

    scoped = tokens.create_scoped("team", ["demo", "fresh"])
    before = len(scenarios.get("demo").chain().releases())
    app = create_app(ServeConfig(upstream="http://127.0.0.1:9/v1"), tokens=tokens.FileTokens())
    with ServerThread(app) as server:
        answer = httpx.post(
            server.url + route, json=body, headers={"authorization": f"Bearer {scoped}"}
        )
        fine = httpx.post(
            server.url + "/reef/scenarios/demo/rollback",
            json={"to": 1, "reason": "line one\n\tline two"},
            headers={"authorization": f"Bearer {scoped}"},
        )
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["field"] == field and field in error["message"]
    assert raw_controls(answer.text) == []
    assert fine.status_code == 201, fine.text
    assert len(scenarios.get("demo").chain().releases()) == before + 1  # only the fine one

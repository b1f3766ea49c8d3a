"""`reef evolve` refuses bad input with one line before anything runs."""

from __future__ import annotations

import re

import pytest

from reef_cli.cli._evolve_run import LITE_NEXT, OTHER_NEXT, next_step
from reef_cli.cli.main import app
from reef_cli.core import scenarios
from tests.cli.helpers import reef_fails, runner
from tests.fakes.scripted import Scripted, draft_json


@pytest.mark.parametrize(
    ("flag", "value", "needle"),
    [
        ("--max-seconds", "-1", "wall-time budget must be a positive number"),
        ("--max-seconds", "0", "wall-time budget must be a positive number"),
        ("--max-seconds", "nan", "wall-time budget must be a positive number"),
        ("--max-calls", "0", "calls budget must be a whole number >= 1"),
        ("--max-tokens", "-5", "tokens budget must be a whole number >= 1"),
    ],
)
def test_an_unusable_budget_is_refused_before_any_work(flag: str, value: str, needle: str) -> None:
    scenarios.create("demo")
    line = reef_fails("evolve", "always test first", "-s", "demo", "--yes", flag, value, code=2)
    assert needle in line and "fix:" in line
    assert scenarios.get("demo").chain().latest() is None  # nothing was published


def test_an_unknown_scenario_is_named_before_a_model_loads() -> None:
    line = reef_fails("evolve", "always test first", "-s", "nope", "--yes")
    assert "unknown scenario 'nope'" in line


def test_an_unknown_adapter_is_one_clear_line() -> None:
    scenarios.create("demo")
    line = reef_fails("evolve", "always test first", "-s", "demo", "--yes", "-a", "vim", code=2)
    assert "unknown adapter 'vim'" in line


def test_unchanged_is_an_outcome_line_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing new to learn from: exit 0 and a plain ``unchanged:`` line on stdout, told
    apart from ``published r2 …`` by its first word (or ``--json``'s state)."""
    monkeypatch.setenv("REEF_MODEL", "openai/never-called")
    monkeypatch.setenv("REEF_API_BASE", "http://127.0.0.1:9/v1")
    scenarios.create("demo")
    result = runner.invoke(app, ["evolve", "--recipe", "skillclaw", "-s", "demo", "--yes"])
    assert result.exit_code == 0, result.output
    assert "error" not in result.output
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert lines == ["unchanged: nothing new to learn from; nothing published"]
    assert scenarios.get("demo").chain().latest() is None


def test_every_outcome_s_exit_code_is_documented() -> None:
    """docs/evolve.md states each end's exit code as the CLI exits with it."""
    from pathlib import Path

    from reef_cli.cli.evolve import EXIT

    text = (Path(__file__).parents[2] / "docs" / "evolve.md").read_text(encoding="utf-8")
    line = " ".join(text.split("\nA job ends ", 1)[1].split("\n\n", 1)[0].split())
    documented = {state: int(code) for state, code in re.findall(r"`(\w+)` \(exit (\d+)\)", line)}
    assert documented == EXIT


def test_quickstart_shows_a_refused_draft_and_what_to_run_instead(
    scripted: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model that drafts junk twice (as the lite model often does): the quickstart ends
    showing the refused draft, each reason and the next step, exit 0, nothing published."""
    monkeypatch.setenv("REEF_MODEL", "openai/scripted")
    monkeypatch.setenv("REEF_API_BASE", scripted.api_base)
    junk = draft_json(
        name="tips",
        description="\nHelpful tips #coding #tips",  # a line break, as SmolLM2 writes one
        body="Visit {{url}} for more. #coding #tips",
        why="Because #123456#",
    )
    scripted.push(junk, junk)  # the draft, and the redraft with the gate's reasons
    result = runner.invoke(app, ["quickstart"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "3. nothing published: the gate refused what openai/scripted" in out
    assert "(2 drafts)" in out and "rule tips (rules/tips.md)" in out
    assert "│ description: Helpful tips #coding #tips\n" in out  # on one line
    assert "│ Visit {{url}} for more." in out  # the draft itself, to look at
    assert "- quality-debris:" in out
    assert "The draft did not pass the gate (quality-on-topic, quality-debris" in out
    assert OTHER_NEXT in " ".join(out.split())
    assert "error" not in result.output and "Traceback" not in result.output
    latest = scenarios.get("quickstart").chain().latest()
    assert latest is not None and latest.number == 1  # the starter tree only
    # on the lite model the next step is the 1.5B model
    assert next_step("embedded SmolLM2-135M-Instruct") == LITE_NEXT
    assert "./install.sh --run" in LITE_NEXT and next_step("openai/gpt-x") == OTHER_NEXT

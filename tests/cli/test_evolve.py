"""`reef evolve` refuses bad input with one line before anything runs."""

from __future__ import annotations

import re

import pytest

from reef_cli.cli.main import app
from reef_cli.core import scenarios
from tests.cli.helpers import reef_fails, runner


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
    line = reef_fails("evolve", "always test first", "-s", "demo", "--yes", "-a", "vim")
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

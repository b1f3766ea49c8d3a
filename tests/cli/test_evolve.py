"""`reef evolve` refuses bad input with one line before anything runs."""

from __future__ import annotations

import pytest

from reef_cli.core import scenarios
from tests.cli.helpers import reef_fails


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

"""`reef eval` end to end in-process: a scripted model answers through the task set's
direct runner; the table, --json, --plot and every bad input's one-line error. Also
`reef harness show` printing a gate evaluation's numbers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reef_cli.cli.main import app
from reef_cli.core import scenarios
from reef_cli.core.checks import Check
from reef_cli.core.publishing import publish_files
from reef_cli.core.tree import starter_tree
from tests.cli.helpers import reef, reef_fails
from tests.core.test_release_page import EVALUATION
from tests.fakes.scripted import Scripted

TASKS = """\
name: numbers
runner: direct
repeats: 1
tasks:
  - {id: q1, prompt: "one?", exact: "1"}
  - {id: q2, prompt: "two?", exact: "2"}
  - {id: q3, prompt: "three?", exact: "3", lenient: {contains: "3"}}
  - {id: train-1, split: train, prompt: "x", exact: "x"}
"""


@pytest.fixture
def setup(tmp_path: Path, scripted: Scripted, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Scenario demo (r1 starter, r2 with a rule), a task file, the scripted model as
    the configured one; returns the task file."""
    scenarios.create("demo")
    files = starter_tree().files()
    publish_files("demo", files, reason="start")
    publish_files("demo", {**files, "rules/count.md": "Answer with the number only.\n"}, reason="n")
    path = tmp_path / "tasks.yaml"
    path.write_text(TASKS)
    monkeypatch.setenv("REEF_MODEL", "openai/scripted")
    monkeypatch.setenv("REEF_API_BASE", scripted.api_base)
    # r1 answers one of three, r2 all three (runs go release by release, task by task)
    scripted.push("1", "no", "no", "1", "2", "3")
    return path


def stdout_of(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_table_shows_means_intervals_and_the_paired_comparison(
    setup: Path, scripted: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.console import Console

    from reef_cli.cli import _output

    monkeypatch.setattr(_output, "_console", Console(width=160, highlight=False))
    out = reef("eval", "-s", "demo", "--tasks", str(setup), "--releases", "1,latest")
    assert "numbers" in out and "test split" in out and "sign rule vs r1" in out
    for column in ("mean [95% CI]", "invalid", "Δ vs r1", "W/L/T", "lenient"):
        assert column in out, out
    assert "baseline" in out
    assert "0.333 [0.000, 1.000]" in out  # r1: one of three
    assert "1.000 [1.000, 1.000]" in out  # r2: all three
    assert "+0.667 [0.000, 1.000]" in out and "2/0/1" in out and "0.250" in out
    # the verdict in the gate's words: two wins of three tasks are not significant
    assert "r2 vs r1: no significant improvement (sign test 2 wins / 0 losses, p=0.250)" in out
    assert len(scripted.inference()) == 6  # the train task never ran


def test_a_narrow_terminal_keeps_every_number(setup: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    from reef_cli.cli import _output

    monkeypatch.setattr(_output, "_console", Console(width=80, highlight=False))
    out = reef("eval", "-s", "demo", "--tasks", str(setup), "--releases", "1,2")
    assert "…" not in out  # intervals go under their values; nothing is cut off
    for text in ("0.333", "1.000", "+0.667", "2/0/1", "0.250", "baseline"):
        assert text in out, out


def test_json_has_the_decide_numbers(setup: Path) -> None:
    data = json.loads(
        stdout_of("eval", "-s", "demo", "--tasks", str(setup), "--releases", "r1,2", "--json")
    )
    assert data["split"] == "test" and data["baseline"] == 1 and data["repeats"] == 1
    first, second = data["releases"]
    assert (first["mean"], first["tasks"], first["runs"], first["invalid"]) == (0.3333, 3, 3, 0)
    assert first["lenient"] == {"tasks": 1, "mean": 0.0, "ci95": [0.0, 0.0]}  # q3 only
    assert first["vs_first"] is None and first["verdict"] is None
    numbers = second["vs_first"]
    assert (numbers["wins"], numbers["losses"], numbers["ties"], numbers["p"]) == (2, 0, 1, 0.25)
    assert numbers["mean_diff"] == 0.6667 and numbers["diff_ci95"] == [0.0, 1.0]
    assert second["verdict"]["against"] == 1 and second["verdict"]["status"] == "failed"
    assert data["about"]["tasks"]["runner"] == "direct"
    assert "openai/scripted" in data["about"]["model"]


def test_plot_writes_a_png(setup: Path, tmp_path: Path) -> None:
    target = tmp_path / "eval.png"
    out = reef("eval", "-s", "demo", "--tasks", str(setup), "-r", "1,2", "--plot", str(target))
    assert "Plot written to" in out
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert target.stat().st_size > 10_000  # a drawn figure, not an empty canvas


def test_plot_without_matplotlib_names_the_extra(
    setup: Path, tmp_path: Path, scripted: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    line = reef_fails(
        "eval",
        "-s",
        "demo",
        "--tasks",
        str(setup),
        "-r",
        "1,2",
        "--plot",
        str(tmp_path / "x.png"),
        code=2,  # ExtraMissing: a missing install, like a usage error
    )
    assert "matplotlib" in line and "pip install 'reef[tasks]'" in line
    assert not (tmp_path / "x.png").exists()
    assert scripted.inference() == []  # refused before any run


def test_bad_input_is_one_line_naming_the_fix(setup: Path, tmp_path: Path) -> None:
    missing = reef_fails(
        "eval", "-s", "demo", "--tasks", str(tmp_path / "no.yaml"), "-r", "1", code=2
    )
    assert "does not exist" in missing and "--tasks" in missing
    unknown = reef_fails("eval", "-s", "demo", "--tasks", str(setup), "-r", "1,9")
    assert "r9 does not exist" in unknown and "reef harness versions" in unknown
    train_only = tmp_path / "train.yaml"
    train_only.write_text("tasks:\n  - {id: a, split: train, prompt: p, exact: x}\n")
    split = reef_fails("eval", "-s", "demo", "--tasks", str(train_only), "-r", "1", code=2)
    assert "no test tasks" in split and "split: test" in split
    nobody = reef_fails("eval", "-s", "nope", "--tasks", str(setup), "-r", "1")
    assert "unknown scenario" in nobody


def test_harness_show_prints_the_gate_evaluation() -> None:
    scenarios.create("demo")
    files = starter_tree().files()
    publish_files("demo", files, reason="start")
    publish_files(
        "demo",
        {**files, "rules/x.md": "Be brief.\n"},
        reason="brief",
        source="recipe:gepa",
        recipe="gepa",
        extra={"evaluation": EVALUATION},
        extra_checks=[Check("evaluation", "passed", EVALUATION["reason"])],  # type: ignore[arg-type]
    )
    out = reef("harness", "show", "2", "-s", "demo")
    assert "evaluation: candidate beats incumbent" in out
    assert "test" in out and "6 x 2 repeat(s)" in out
    assert "0.833 [0.500, 1.000]" in out and "0.167 [0.000, 0.500]" in out
    assert "+0.667 [0.333, 1.000]" in out
    assert "5/0/1, sign test p=0.0312" in out
    assert "candidate 0.900, incumbent 0.500, Δ +0.400 [0.100, 0.700]" in out
    plain = reef("harness", "show", "1", "-s", "demo")
    assert "evaluation:" not in plain

"""`reef bench personas` and the checks `reef bench learn` makes before it starts
anything: bad options are one line, exit 2, and leave no state behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from recipes.personas import load, shipped
from tests.cli.helpers import reef, reef_fails, reef_json

LEARN_OPTIONS = (
    "--persona",
    "--recipe",
    "--sessions",
    "--batch-size",
    "--plot",
    "--home",
    "--json",
)


def test_bench_personas_lists_every_shipped_persona() -> None:
    out = reef("bench", "personas")
    lines = out.splitlines()
    assert len(lines) == len(shipped())
    for name, path in shipped().items():
        line = next(ln for ln in lines if ln.split()[0] == name)
        first = load(path).description.split()[0]
        assert first in line  # with what it prefers


def test_bench_personas_json_names_and_describes_each() -> None:
    rows = reef_json("bench", "personas")
    assert [r["name"] for r in rows] == sorted(shipped())
    for row in rows:
        assert set(row) == {"name", "description"}
        assert row["description"] and "\n" not in row["description"]


PROBE = """
import json, sys
from reef_cli.cli.main import app
try:
    app(args=["bench", "learn", "--help"], prog_name="reef")
except SystemExit:
    pass
heavy = ("recipes", "yaml", "httpx", "pydantic", "litellm", "matplotlib", "reasoning_gym")
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy)), file=sys.stderr)
"""


def test_bench_learn_help_lists_the_options_and_imports_no_recipe() -> None:
    """Fast: `--help` loads neither the recipes nor the persona parser (nor what they
    pull in); the help names every option."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(done.stderr.strip().splitlines()[-1]) == []
    for option in LEARN_OPTIONS:
        assert option in done.stdout, option
    assert "Usage: reef bench learn" in done.stdout


def snapshot(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--recipe", "gepa"], "runs skillclaw, not 'gepa'"),
        (["--recipe", "nope"], "not 'nope'"),
        (["--sessions", "13"], "--sessions 13 is more than the persona's 12 train prompts"),
    ],
    ids=["recipe-gepa", "recipe-unknown", "sessions-above-train"],
)
def test_bench_learn_refuses_a_bad_option_with_one_line_before_it_starts(
    args: list[str], words: str, tmp_path: Path, reef_home: Path
) -> None:
    before = snapshot(reef_home)
    keep = tmp_path / "kept"
    line = reef_fails(
        "bench", "learn", "--persona", "plain-prose", "--home", str(keep), *args, code=2
    )
    assert words in line and "(fix: " in line
    assert snapshot(reef_home) == before and not keep.exists()  # nothing started


def test_bench_learn_sessions_up_to_the_train_size_passes_the_check() -> None:
    """The boundary: as many sessions as train prompts is allowed (checked without a run)."""
    from recipes import learn, personas

    persona = personas.resolve("plain-prose")
    learn.check_options(learn.LearnOptions(persona=persona, sessions=persona.prompts.train))


def test_bench_learn_refuses_a_home_that_is_not_empty(tmp_path: Path) -> None:
    home = tmp_path / "used"
    home.mkdir()
    (home / "keep.txt").write_text("mine", encoding="utf-8")
    line = reef_fails("bench", "learn", "--persona", "plain-prose", "--home", str(home), code=2)
    assert "is not empty" in line
    assert snapshot(home) == ["keep.txt"]


def test_bench_learn_with_an_unknown_persona_name_is_one_line() -> None:
    line = reef_fails("bench", "learn", "--persona", "no-such-persona", code=2)
    assert "no-such-persona" in line

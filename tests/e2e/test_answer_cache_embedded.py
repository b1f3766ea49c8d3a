"""The answer cache's promise on the real embedded model: at temperature 0 the same
request gives the same answer, so a stored answer *is* the answer. `reef eval` of two
releases runs once on the model, then again from the cache (no model call), then with
--no-cache (every call again): the three reports are the same, number for number."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reef_cli.cli.main import app
from reef_cli.core import embedded, scenarios
from reef_cli.core.publishing import publish_files
from reef_cli.core.tree import starter_tree

TASKS = """\
name: colours
runner: direct
repeats: 1
tasks:
  - {id: sky, prompt: "What colour is a clear sky? One word.", contains: "blue"}
  - {id: grass, prompt: "What colour is grass? One word.", contains: "green"}
  - {id: snow, prompt: "What colour is snow? One word.", contains: "white"}
"""


def _eval(tasks: Path, *extra: str) -> dict:
    result = CliRunner().invoke(
        app,
        ["eval", "--tasks", str(tasks), "--releases", "1,2", "-s", "demo", "--json", *extra],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.skipif(
    embedded.model_path(embedded.spec_named("smollm2-135m")) is None,
    reason="the lite embedded model is not installed (./install.sh --dev installs it)",
)
def test_cached_answers_are_the_answers_the_model_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REEF_EMBEDDED_MODEL", "smollm2-135m")
    scenarios.create("demo")
    files = starter_tree().files()
    publish_files("demo", files, reason="start")
    publish_files("demo", {**files, "rules/short.md": "Answer in one word.\n"}, reason="short")
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASKS)

    first = _eval(tasks)
    cached = _eval(tasks)
    fresh = _eval(tasks, "--no-cache")

    assert [r["invalid"] for r in first["releases"]] == [0, 0]  # every task was answered
    assert first.pop("answers_reused") == 0
    assert cached.pop("answers_reused") == 6  # 2 releases x 3 tasks, no model call
    assert fresh.pop("answers_reused") == 0
    assert cached == first
    assert fresh == first  # asked again: the same answers, so the same numbers

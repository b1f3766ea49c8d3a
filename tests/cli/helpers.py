"""Run the real `reef` CLI in-process and read its output."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from reef_cli.cli.main import app

runner = CliRunner()


def reef(*args: str, code: int = 0) -> str:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == code, f"exit {result.exit_code}: {result.output}"
    return result.output


def reef_json(*args: str) -> Any:
    return json.loads(reef(*args, "--json"))


def reef_fails(*args: str, code: int = 1) -> str:
    """A failing command: the exit code and exactly one error line, no traceback."""
    result = runner.invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == code, f"exit {result.exit_code}: {result.output}"
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("reef: error:"), result.output
    assert "Traceback" not in result.output
    return lines[0]

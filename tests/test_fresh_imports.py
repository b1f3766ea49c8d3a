"""Every module imports on its own, in a fresh process.

The suite imports modules in whatever order its tests run, so a circle that breaks only
when one particular module is imported first (``from x import y`` of a partly loaded
module) can pass every test and still crash a command that starts there — as
``recipes.tasks.scoring`` first did for a fresh `reef tasks show`. Each module is
imported in a child forked from a process that has imported none of Reef.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("reef_cli", "recipes", "adapters", "sandbox", "reefd")

CHILD = r"""
import importlib, os, sys
failed = []
for name in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException as exc:
            sys.stderr.write(f"{name}: {type(exc).__name__}: {exc}\n")
            os._exit(1)
        os._exit(0)
    if os.waitpid(pid, 0)[1]:
        failed.append(name)
print("\n".join(failed))
sys.exit(1 if failed else 0)
"""


def modules() -> list[str]:
    """Every module of Reef's packages, read from the files (importing would load them)."""
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if "shipped" in parts or any(p.startswith(".") for p in parts):
                continue
            out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def test_every_module_imports_first_in_a_fresh_process() -> None:
    names = modules()
    assert "recipes.tasks.scoring" in names and "reef_cli.cli.main" in names
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *names], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, f"modules that fail to import first:\n{done.stderr}"


def test_a_module_that_only_imports_after_another_fails_here(tmp_path: Path) -> None:
    """The check itself: b imports a, which takes a name from b before b has defined it,
    so b fails when imported first; a, imported first, works."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import VALUE\n")
    (pkg / "b.py").write_text("from pkg import a\nVALUE = 1\n")
    done = subprocess.run(
        [sys.executable, "-c", CHILD, "pkg.b", "pkg.a"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "pkg.b: ImportError" in done.stderr
    assert done.stdout.split() == ["pkg.b"]

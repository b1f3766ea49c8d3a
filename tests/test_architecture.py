"""The dependency arrows of DESIGN §2, checked on every import statement (function-local
ones included) of every module, parsed with ``ast``.

    cli -> everything          server -> core           recipes -> core, sandbox, adapters, server
    adapters -> core           sandbox -> core          reefd -> core, server, recipes

``core`` and ``server`` import none of recipes, adapters, sandbox: what they need from
them comes in through a protocol defined in core (``JobRunner``; ``adapters.base.Launch``
is the reverse case — adapters define it, recipes implement it with the sandbox).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# package -> the Reef packages it may import (itself is always allowed)
ALLOWED: dict[str, set[str]] = {
    "reef_cli.core": set(),
    "reef_cli.server": {"reef_cli.core"},
    "adapters": {"reef_cli.core"},
    "sandbox": {"reef_cli.core"},
    "recipes": {"reef_cli.core", "reef_cli.server", "sandbox", "adapters"},
    "reefd": {"reef_cli.core", "reef_cli.server", "recipes"},
    "reef_cli.cli": {"reef_cli.core", "reef_cli.server", "recipes", "adapters", "sandbox", "reefd"},
}
PACKAGES = (
    "reef_cli.core",
    "reef_cli.server",
    "reef_cli.cli",
    "adapters",
    "sandbox",
    "recipes",
    "reefd",
)


def package_of(module: str) -> str | None:
    for package in PACKAGES:
        if module == package or module.startswith(package + "."):
            return package
    if module == "reef_cli" or module.startswith("reef_cli."):
        return "reef_cli"  # reef_cli/__init__.py, __main__.py: the CLI's front door
    return None


def imports_of(path: Path, module: str) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if path.name == "__init__.py" else 0)]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.append((node.lineno, name))
    return found


def modules() -> list[tuple[Path, str]]:
    out = []
    for top in ("reef_cli", "adapters", "recipes", "sandbox", "reefd"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out.append((path, ".".join(parts)))
    return out


def violations() -> list[str]:
    bad = []
    for path, module in modules():
        own = package_of(module)
        if own is None or own == "reef_cli":
            continue
        for line, name in imports_of(path, module):
            target = package_of(name)
            if target is None or target == own or target == "reef_cli":
                continue
            if target not in ALLOWED[own]:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {own} imports {name}")
    return bad


def test_every_import_points_the_way_design_says() -> None:
    assert violations() == []


def test_core_and_server_import_no_recipe_adapter_or_sandbox() -> None:
    for path, module in modules():
        if package_of(module) not in ("reef_cli.core", "reef_cli.server"):
            continue
        for line, name in imports_of(path, module):
            top = name.split(".")[0]
            assert top not in ("recipes", "adapters", "sandbox"), f"{path}:{line}: {name}"


def test_the_checker_sees_function_local_and_relative_imports(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text("def f():\n    from recipes import engine\n    from . import x\n")
    found = imports_of(source, "reef_cli.server.mod")
    assert (2, "recipes") in found and (3, "reef_cli.server") in found

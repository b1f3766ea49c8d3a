"""The dependency arrows of DESIGN §2, checked on every import statement (function-local
ones included) of every module, parsed with ``ast``.

    cli -> everything          server -> core           recipes -> core, sandbox, adapters, server
    adapters -> core           sandbox -> core          reefd -> core, server, recipes

``core`` and ``server`` import none of recipes, adapters, sandbox: what they need from
them comes in through a protocol defined in core (``JobRunner``; ``adapters.base.Launch``
is the reverse case — adapters define it, recipes implement it with the sandbox).

No import circles either, inside a package or between packages (``circles``): a circle is
a strongly connected component of the module graph over reef_cli, adapters, recipes,
sandbox and reefd. The rule for what is an edge:

- every ``import`` that can run counts, at module level or inside a function (a
  function-local import is a runtime dependency the reader does not see at the top);
- imports under ``if TYPE_CHECKING:`` do not count: they never run, and a circle made
  only of them is an annotation naming a class, not a dependency (its ``else:`` counts);
- ``import a.b.c`` and ``from a.b import c`` (``c`` a module) are edges to ``a.b.c``;
  ``from a.b import name`` (not a module) and ``import a.b`` are edges to the package
  ``a.b`` (its ``__init__``). The ``__init__`` files of the parent packages, which
  Python runs on the way, are edges too (``from a.b.c import x`` runs ``a.b``'s), save
  the packages the importer is itself inside: those are already loading when it runs.
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
            found.append((node.lineno, _from_name(node, path, module)))
    return found


def _from_name(node: ast.ImportFrom, path: Path, module: str) -> str:
    """The module a ``from … import`` names; a relative one resolved against ``module``."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if path.name == "__init__.py" else 0)]
    return ".".join([*base, node.module] if node.module else base)


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


# --- import circles (the rule: the module docstring) ---------------------------------


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(path: Path, module: str) -> list[tuple[int, str, list[str]]]:
    """(line, module or package named, names imported from it) for each import that can run."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[tuple[int, str, list[str]]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:  # the else branch of `if TYPE_CHECKING:` does run
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            name = _from_name(node, path, module)
            found.append((node.lineno, name, [alias.name for alias in node.names]))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(files: list[tuple[Path, str]]) -> dict[str, set[str]]:
    """Module -> the modules among ``files`` it imports at runtime (see the rule above)."""
    known = {module for _, module in files}
    graph: dict[str, set[str]] = {module: set() for module in known}
    for path, module in files:
        for _, name, names in runtime_imports(path, module):
            targets = [f"{name}.{n}" for n in names if f"{name}.{n}" in known]
            if len(targets) < len(names) or not names:  # some names are not modules
                target = name
                while target and target not in known:  # `import a.b.c` of a non-module c
                    target = target.rpartition(".")[0]
                if target:
                    targets.append(target)
            # importing a.b.c first runs the packages a and a.b (their __init__), save the
            # ones the importer is inside: those are already loading when it runs
            own = _parents(module)
            parents = {p for t in targets for p in _parents(t) if p in known and p not in own}
            graph[module].update(t for t in [*targets, *parents] if t != module)
    return graph


def _parents(module: str) -> list[str]:
    """The packages ``module`` is inside, outermost first: a.b.c -> [a, a.b]."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (deep import chains would overflow recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for succ in edges:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def _cycle_through(start: str, members: set[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest path start -> … -> start inside one component (breadth-first)."""
    came_from: dict[str, str] = {}
    queue = [start]
    for node in queue:
        for succ in sorted(graph[node] & members):
            if succ == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if succ not in came_from:
                came_from[succ] = node
                queue.append(succ)
    raise AssertionError(f"{start} is in no circle")


def circles(files: list[tuple[Path, str]]) -> list[str]:
    """Each import circle among ``files`` as ``a -> b -> a`` (and its whole component)."""
    graph = import_graph(files)
    found = []
    for component in strongly_connected(graph):
        if len(component) < 2:
            continue
        line = " -> ".join(_cycle_through(component[0], set(component), graph))
        if len(component) > 2:
            line += f"   (component: {', '.join(component)})"
        found.append(line)
    return found


def test_no_import_circles() -> None:
    """A circle is fixed by moving the shared part to the module that owns it (one both
    sides can import), not by hiding an import inside a function: those count here."""
    found = circles(modules())
    assert not found, f"{len(found)} import circle(s):\n" + "\n".join(found)


def _package(root: Path, files: dict[str, str]) -> list[tuple[Path, str]]:
    """Write ``{module: source}`` under ``root`` as a package tree; (path, module) pairs."""
    out = []
    for module, source in files.items():
        parts = module.split(".")
        is_package = any(other.startswith(module + ".") for other in files)
        path = (
            root.joinpath(*parts, "__init__.py")
            if is_package
            else root.joinpath(*parts[:-1], parts[-1] + ".py")
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        out.append((path, module))
    return out


def test_a_planted_circle_is_reported_even_through_a_function_local_import(tmp_path: Path) -> None:
    files = _package(
        tmp_path,
        {
            "pkg": "",
            "pkg.a": "from pkg.b import helper\n",
            "pkg.b": "def helper():\n    from . import a\n    return a\n",
            "pkg.c": "import pkg.a\n",  # depends on the circle, is not in it
        },
    )
    assert circles(files) == ["pkg.a -> pkg.b -> pkg.a"]
    (tmp_path / "pkg" / "b.py").write_text("def helper():\n    return 1\n")
    assert circles(files) == []


def test_a_circle_through_a_package_init_and_a_longer_one_are_reported(tmp_path: Path) -> None:
    files = _package(
        tmp_path,
        {
            "top": "",
            "top.sync": "def make():\n    from top.sync import disk\n",
            "top.sync.disk": "from top.sync import make\n",  # names the package's __init__
            "top.x": "from top import y\n",
            "top.y": "from top.z import thing\n",
            "top.z": "import top.x as x\nthing = 1\n",
        },
    )
    assert circles(files) == [
        "top.sync -> top.sync.disk -> top.sync",
        "top.x -> top.y -> top.z -> top.x   (component: top.x, top.y, top.z)",
    ]


def test_type_checking_imports_are_no_edge_but_their_else_is(tmp_path: Path) -> None:
    only_types = {
        "pkg": "",
        "pkg.a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
        "pkg.b": "import typing\nif typing.TYPE_CHECKING:\n    pass\nfrom pkg.a import A\n",
    }
    assert circles(_package(tmp_path / "one", only_types)) == []
    with_else = dict(only_types, **{"pkg.a": only_types["pkg.a"] + "else:\n    import pkg.b\n"})
    assert circles(_package(tmp_path / "two", with_else)) == ["pkg.a -> pkg.b -> pkg.a"]


def test_strongly_connected_finds_each_component_once() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    found = sorted(component for component in strongly_connected(graph) if len(component) > 1)
    assert found == [["a", "b", "c"], ["d", "e"]]
    chain = {str(n): {str(n + 1)} for n in range(5000)} | {"5000": set()}  # no recursion limit
    assert all(len(component) == 1 for component in strongly_connected(chain))


def test_importing_a_submodule_runs_its_packages_init(tmp_path: Path) -> None:
    """`from top.engine.quality import X` runs `top/engine/__init__.py` first: when that
    __init__ leads back to the importer, it is a circle (the one `recipes.tasks.scoring`
    and an engine package's __init__ made), though no line names the package. A module
    importing a sibling inside its own package adds no such edge: its package is already
    loading."""
    files = _package(
        tmp_path,
        {
            "top": "",
            "top.engine": "from top.tasks import run\n",
            "top.engine.quality": "X = 1\n",
            "top.tasks": "from top.tasks.scoring import run\n",
            "top.tasks.scoring": "from top.engine.quality import X\nfrom top.tasks import other\n",
            "top.tasks.other": "",
        },
    )
    assert circles(files) == [
        "top.engine -> top.tasks -> top.tasks.scoring -> top.engine"
        "   (component: top.engine, top.tasks, top.tasks.scoring)"
    ]
    (tmp_path / "top" / "engine" / "__init__.py").write_text("")
    assert circles(files) == []

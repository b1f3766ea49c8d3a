"""Extension points read from Python entry points: one table per point, built-ins included.

A package extends Reef by naming a *row* under an entry-point group in its own metadata,
the way simonw/llm's plugins do; Reef's own recipes and agents are registered the same way
in pyproject.toml, so a third party's row is read by exactly the code that reads ours:

    [project.entry-points."reef.recipes"]
    mine = "my_package.recipe:RECIPE"      # a RecipeInfo

A row is plain data in a light module (no recipe or agent code is imported to list them),
so the CLI's help, the server's config checks and the live loop read it cheaply; the
class it names is imported only when it runs. ``core`` imports no plugin package: rows
name their classes as ``module:attribute`` and ``load`` imports them.

A row that cannot be read (an import error, a wrong type, a name that differs from its
entry point's, a name taken earlier) is left out with one warning naming the package; the
other rows still load.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from typing import Any, TypeVar

from reef_cli.core.errors import OptionInvalid

log = logging.getLogger("reef")

RECIPES_GROUP = "reef.recipes"
ADAPTERS_GROUP = "reef.adapters"
OWN_DISTRIBUTION = "reef"  # its rows come first

Row = TypeVar("Row")


@dataclass(frozen=True)
class RecipeInfo:
    """What every part of Reef needs to know about a recipe without importing it.

    ``factory``: ``module:attribute`` of its class, which has ``with_options(options)``;
    ``needs_ask``: it drafts from a sentence (`reef evolve ASK`, POST /reef/evolve's
    ``ask``), so it cannot run unattended; ``reads_sessions``: the live loop hands it the
    scenario's recorded sessions (it becomes eligible as they grow); ``needs_tasks``: it
    searches the scenario's task set, so the live loop waits for a tasks.yaml;
    ``summary``: a few words for help texts."""

    name: str
    factory: str
    summary: str
    needs_ask: bool = False
    reads_sessions: bool = False
    needs_tasks: bool = False

    @property
    def unattended(self) -> bool:
        """It can run with nobody there: the live loop, ``--schedule nightly``."""
        return not self.needs_ask


def load(reference: str) -> Any:
    """The object named ``module:attribute``."""
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


_read: dict[str, tuple[Any, ...]] = {}  # group -> its rows, read once per process


def rows(group: str, kind: type[Row]) -> tuple[Row, ...]:
    """Every valid row registered under ``group``: Reef's own first, then the others, each
    by name."""
    if group not in _read:
        _read[group] = _load(group, kind)
    return _read[group]


def _load(group: str, kind: type[Row]) -> tuple[Row, ...]:
    from importlib.metadata import entry_points

    found = list(entry_points(group=group))
    own = sorted((ep for ep in found if _distribution(ep) == OWN_DISTRIBUTION), key=_name)
    others = sorted((ep for ep in found if ep not in own), key=_name)
    table: dict[str, Row] = {}
    for ep in own + others:
        where = f"{ep.name} = {ep.value} ({_distribution(ep) or 'unknown package'})"
        try:
            row = ep.load()
        except Exception as exc:  # a broken plugin must not take Reef down
            _skip(group, where, f"it cannot be imported: {type(exc).__name__}: {exc}")
            continue
        if not isinstance(row, kind) or getattr(row, "name", None) != ep.name:
            _skip(group, where, f"it is not a {kind.__name__} named {ep.name!r}")
        elif ep.name in table:
            _skip(group, where, f"{ep.name!r} is registered earlier")
        else:
            table[ep.name] = row
    return tuple(table.values())


def _name(ep: Any) -> str:
    return str(ep.name)


def _distribution(ep: Any) -> str | None:
    dist = getattr(ep, "dist", None)
    return dist.name if dist is not None else None


def _skip(group: str, where: str, why: str) -> None:
    log.warning(
        "reef: the %s entry point %s is left out: %s (fix or uninstall that package)",
        group,
        where,
        why,
    )


def forget() -> None:
    """Read the entry points again on next use (tests that install a plugin)."""
    _read.clear()


# --- recipes ---------------------------------------------------------------------------


def recipes() -> tuple[RecipeInfo, ...]:
    return rows(RECIPES_GROUP, RecipeInfo)


def recipe_names(*, unattended: bool = False) -> tuple[str, ...]:
    return tuple(r.name for r in recipes() if r.unattended or not unattended)


def recipe(name: str) -> RecipeInfo:
    """The recipe called ``name``; a clear error naming the registered ones otherwise."""
    for row in recipes():
        if row.name == name:
            return row
    raise OptionInvalid(f"unknown recipe {name!r}", unknown_fix(recipe_names()))


def unknown_fix(names: tuple[str, ...]) -> str:
    """The fix for an unknown name: the registered ones, or, with none at all, the
    reinstall that writes Reef's own entry points (a checkout updated without it)."""
    if not names:
        return "none is registered: reinstall Reef (./install.sh, or pip install -e .)"
    return f"use one of: {', '.join(names)}"


def recipes_text() -> str:
    """``gepa (a search …), reefine (…) or skillclaw (…)`` for help texts."""
    return _listed([f"{r.name} ({r.summary})" for r in recipes()])


def unattended_text() -> str:
    """``gepa or skillclaw``: the recipes that need no ask."""
    return _listed(list(recipe_names(unattended=True)))


def _listed(parts: list[str]) -> str:
    return ", ".join(parts[:-1]) + " or " + parts[-1] if len(parts) > 1 else "".join(parts)

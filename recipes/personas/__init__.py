"""Simulated users with hidden preferences, and the parts that measure learning from them.

``spec`` (the public persona file format), ``checks`` (how a reply is accepted or
complained about), ``prompts`` (train and held-out prompts, disjoint), ``shipped`` (the
personas Reef ships). The live measurement is ``recipes.learn``; docs/personas.md has the
format and docs/results.md the measurements.
"""

from __future__ import annotations

from pathlib import Path

from recipes.personas.checks import Verdict, judge
from recipes.personas.prompts import Prompt, PromptSplit, split
from recipes.personas.spec import Check, Persona, load, parse

SHIPPED = Path(__file__).parent / "shipped"


def shipped() -> dict[str, Path]:
    """The personas Reef ships, by name."""
    return {p.stem: p for p in sorted(SHIPPED.glob("*.yaml"))}


def resolve(name_or_path: str) -> Persona:
    """A shipped persona's name, or a path to a persona file."""
    known = shipped()
    if name_or_path in known:
        return load(known[name_or_path])
    return load(Path(name_or_path))


__all__ = [
    "Check",
    "Persona",
    "Prompt",
    "PromptSplit",
    "Verdict",
    "judge",
    "load",
    "parse",
    "resolve",
    "shipped",
    "split",
]

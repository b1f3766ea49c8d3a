"""Names of scenarios, rules, skills, commands and extensions: kebab-case, bounded length."""

from __future__ import annotations

import re

from reef_cli.core.errors import InvalidName

MAX_NAME = 64
_KEBAB = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def is_kebab(name: str) -> bool:
    return len(name) <= MAX_NAME and bool(_KEBAB.match(name))


def check_name(kind: str, name: str) -> str:
    """Return ``name`` if it is kebab-case (``fix-bugs``), else raise ``InvalidName``."""
    if not is_kebab(name):
        suggestion = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:MAX_NAME] or "my-name"
        raise InvalidName(
            f"{kind} name {name!r} is not kebab-case (lowercase letters, digits, single hyphens, "
            f"at most {MAX_NAME} characters)",
            f"use a name like {suggestion!r}",
        )
    return name

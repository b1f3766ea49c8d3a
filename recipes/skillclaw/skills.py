"""The tree's skills as SkillClaw reads and writes them: ``skills/<name>/SKILL.md`` with
frontmatter ``name`` + ``description``, then the body.

An edit to the body keeps the frontmatter byte for byte; a new description rewrites
only that key; a new skill gets both keys. Other files of a skill folder are untouched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from reef_cli.core.frontmatter import read_frontmatter, split_frontmatter, with_frontmatter

_SKILL_PATH = re.compile(r"^skills/([^/]+)/SKILL\.md$")


@dataclass(frozen=True)
class SkillText:
    name: str
    description: str
    body: str
    original: str | None = None  # the file as the served tree has it (None: a new skill)

    @property
    def path(self) -> str:
        return skill_path(self.name)

    def with_body(self, body: str) -> SkillText:
        return replace(self, body=body)

    def with_description(self, description: str) -> SkillText:
        return replace(self, description=description)

    def render(self) -> str:
        """The SKILL.md text: the original frontmatter when only the body changed."""
        body = "\n" + self.body.strip() + "\n"
        if self.original is not None:
            old = read_frontmatter(self.original, self.path)
            meta = old.meta or {}
            if str(meta.get("description") or "") == self.description:
                return old.head + body
            head = {**meta, "description": self.description}
        else:
            head = {"name": self.name, "description": self.description}
        return with_frontmatter(head, body)


def skill_path(name: str) -> str:
    return f"skills/{name}/SKILL.md"


def skills_of(files: dict[str, str]) -> dict[str, SkillText]:
    """The tree's skills by name."""
    out: dict[str, SkillText] = {}
    for path in sorted(files):
        match = _SKILL_PATH.match(path)
        if not match:
            continue
        meta, body = split_frontmatter(files[path], path)
        name = match.group(1)
        description = str((meta or {}).get("description") or "")
        out[name] = SkillText(name, description, body, files[path])
    return out

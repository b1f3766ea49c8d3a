"""A tree as GEPA's candidate: the text of each rule and skill body, by tree path.

GEPA evolves ``dict[str, str]``; Reef's tree also holds frontmatter, commands,
extensions and ``reef.toml``, which a reflection model has no business rewriting. So a
component is a body only — ``rules/<name>.md`` and ``skills/<name>/SKILL.md`` — and
everything else (each body's frontmatter included, byte for byte) is put back unchanged
when a candidate becomes files again. Files a search adds whole (the demonstrations
skill, ``recipes.demos``) are ``added``: part of every tree of the search, never a
component, since reflection would rewrite the user's accepted answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from recipes.base import Change
from reef_cli.core.frontmatter import read_frontmatter, with_frontmatter

SEED_PATH = "rules/task-guidance.md"
# An empty tree has no text to evolve, and gepa refuses an empty seed: start from a
# short, neutral rule that says nothing a task set could be tuned to.
SEED_BODY = "Read the task carefully and answer it."


def is_component(path: str) -> bool:
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == "rules" and parts[1].endswith(".md"):
        return True
    return len(parts) == 3 and parts[0] == "skills" and parts[2] == "SKILL.md"


def split_head(text: str, path: str) -> tuple[str, str]:
    """(frontmatter block verbatim, body); ("", text) when there is none. The one split
    of ``reef_cli.core.frontmatter``, the head kept literal so it is put back untouched."""
    found = read_frontmatter(text, path)
    return found.head, found.body


def _kind_name(path: str) -> tuple[str, str]:
    parts = path.split("/")
    if parts[0] == "rules":
        return "rule", parts[1].removesuffix(".md")
    return "skill", parts[1]


@dataclass
class Layout:
    """The tree a search starts from, split into GEPA's components and the rest."""

    files: dict[str, str]  # the starting tree, seed rule included
    heads: dict[str, str]  # path -> frontmatter block ("" for none)
    seed: dict[str, str]  # path -> body: GEPA's seed candidate
    seeded: str | None = None  # the path of the neutral rule added to an empty tree
    leads: dict[str, str] = field(default_factory=dict)  # path -> blank lines before a body
    added: dict[str, str] = field(default_factory=dict)  # whole files added, not evolved

    @classmethod
    def of(cls, incumbent: dict[str, str], added: dict[str, str] | None = None) -> Layout:
        extra = dict(added or {})
        files = {p: t for p, t in incumbent.items() if p not in extra}
        seeded = None
        if not any(is_component(p) and split_head(t, p)[1].strip() for p, t in files.items()):
            files[SEED_PATH] = SEED_BODY + "\n"
            seeded = SEED_PATH
        heads: dict[str, str] = {}
        seed: dict[str, str] = {}
        leads: dict[str, str] = {}
        for path in sorted(p for p in files if is_component(p)):
            head, body = split_head(files[path], path)
            if not body.strip():
                continue  # nothing to evolve; the file is copied as it is
            heads[path] = head
            seed[path] = body.strip()
            leads[path] = body[: len(body) - len(body.lstrip("\n"))]
        files.update(extra)
        return cls(files=files, heads=heads, seed=seed, seeded=seeded, leads=leads, added=extra)

    def tree(self, candidate: dict[str, str]) -> dict[str, str]:
        """The files of ``candidate``: changed bodies under their old frontmatter."""
        out = dict(self.files)
        for path, body in candidate.items():
            if path in self.seed and body.strip() != self.seed[path]:
                text = self.leads[path] + body.strip() + "\n"
                # no head: a body opening with --- gets an empty block, so it reads back
                out[path] = (
                    self.heads[path] + text if self.heads[path] else with_frontmatter({}, text)
                )
        return out

    def changed(self, candidate: dict[str, str]) -> list[str]:
        return [p for p in sorted(self.seed) if candidate.get(p, "").strip() != self.seed[p]]

    def changes(self, candidate: dict[str, str], why: str) -> list[Change]:
        """One ``Change`` per component the search rewrote (the seeded rule is an addition
        when the best candidate keeps it; a tree that was empty gets it either way)."""
        out: list[Change] = []
        paths = self.changed(candidate)
        if self.seeded and self.seeded not in paths:
            paths.insert(0, self.seeded)
        for path in paths:
            kind, name = _kind_name(path)
            verb = "added" if path == self.seeded else "rewrote"
            out.append(Change(kind, name, path, why, f"GEPA {verb} {path}"))
        for path in sorted(self.added):
            kind, name = _kind_name(path)
            out.append(Change(kind, name, path, why, f"GEPA added {path} (chosen on val)"))
        return out

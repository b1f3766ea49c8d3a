"""What the adapters' renders share: Reef's rules section, the template environment,
and which of a release's files an agent takes as they are. (A markdown frontmatter is
``reef_cli.core.frontmatter``'s, as for every part of Reef.)"""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from adapters.base import ReleaseToInstall
from reef_cli.core.tree import HarnessTree


def environment(folder: Path, *, trim_blocks: bool = True) -> Environment:
    """Templates in ``folder``: plain text (no escaping), every variable required."""
    return Environment(
        loader=FileSystemLoader(str(folder)),
        keep_trailing_newline=True,
        autoescape=False,
        undefined=StrictUndefined,
        trim_blocks=trim_blocks,
    )


def rules_section(tree: HarnessTree, scenario: str, number: int) -> str:
    """The body of Reef's section in the agent's rules file (``CLAUDE.md``,
    ``AGENTS.md``): every rule, in the tree's order, each under a marker."""
    lines = [f'# Reef harness: scenario "{scenario}", release r{number}']
    if not tree.rules:
        lines += ["", "(This release has no rules.)"]
    for rule in tree.rules:
        lines += ["", f"<!-- reef rule: {rule.name} -->", rule.body.strip()]
    return "\n".join(lines) + "\n"


def copied(
    release: ReleaseToInstall, prefixes: tuple[str, ...]
) -> tuple[dict[str, str], list[str]]:
    """The release's files under ``prefixes``, at the same paths, and its pi extensions,
    which the agent has no equivalent for (the install records them as ``skipped``)."""
    owned = {rel: text for rel, text in release.files.items() if rel.startswith(prefixes)}
    skipped = sorted(rel for rel in release.files if rel.startswith("extensions/"))
    return owned, skipped

"""The text ``/reload`` hands a Claude Code session: the installed release's rules (Reef's
section of CLAUDE.md) and the skills and commands it installed, with their descriptions
and files.

It is read from the folder, not the chain, so the session gets exactly what a new
session would load. Claude Code 2.1 may cut a hook's ``additionalContext`` at 8000
characters or 200 lines, so rules too long to quote are pointed to in CLAUDE.md instead.
"""

from __future__ import annotations

import re
from pathlib import Path

from adapters import _files
from adapters.claude_code.render import RESERVED_COMMANDS

MAX_CHARS = 7500
MAX_LINES = 180
MAX_LISTED = 30  # skills, and commands, named one per line
_SKILL = re.compile(r"skills/([^/]+)/SKILL\.md")
_COMMAND = re.compile(r"commands/([^/]+)\.md")


def text(target: Path, scenario: str, number: int, was: int | None) -> str:
    """The context for ``/reload`` of release ``number`` (``was``: the release this session
    had loaded, when known)."""
    had = f" (this session had r{was})" if was is not None else ""
    head = [
        f'Reef /reload: release r{number} of Reef scenario "{scenario}" is now installed in '
        f"{target}{had}. It replaces the harness instructions Reef gave you when this session "
        "started: Reef's section of CLAUDE.md (between the reef:begin and reef:end markers) "
        "and Reef's skills and commands. Follow this release from now on; where it differs "
        "from what you read at session start, this release wins.",
        "",
    ]
    tail = [*_listing(target, "skills"), "", *_listing(target, "commands")]
    quoted = [*head, "Rules (Reef's section of CLAUDE.md):", "", _rules(target).strip(), "", *tail]
    whole = "\n".join(quoted)
    if len(whole) <= MAX_CHARS and whole.count("\n") < MAX_LINES:
        return whole
    pointer = (
        f"Rules: too long to quote here. Before anything else, read Reef's section of "
        f"{target / 'CLAUDE.md'} (between the reef:begin and reef:end markers; it names "
        f"release r{number}) with the Read tool and follow it."
    )
    return "\n".join([*head, pointer, "", *tail])


def _rules(target: Path) -> str:
    path = target / "CLAUDE.md"
    try:
        body = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        body = ""
    start, end = body.find(_files.BEGIN), body.find(_files.END)
    if start == -1 or end < start:
        raise _files.InstallError(
            f"Reef's section of {path} is missing (edited since the install?), so /reload "
            "has nothing to load",
            "install again: reef harness install --adapter claude-code",
        )
    return body[start + len(_files.BEGIN) : end]


def _listing(target: Path, kind: str) -> list[str]:
    """Reef's installed skills or commands, one line each: name, description, file."""
    from reef_cli.core.errors import TreeError
    from reef_cli.core.frontmatter import split_frontmatter

    pattern = _SKILL if kind == "skills" else _COMMAND
    owned = (_files.load_manifest(target) or {}).get("owned", [])
    found = []
    for rel in sorted(owned):
        match = pattern.fullmatch(rel)
        if match is None or (kind == "commands" and match[1] in RESERVED_COMMANDS):
            continue
        try:
            meta, _ = split_frontmatter((target / rel).read_text(encoding="utf-8"), rel)
        except (OSError, UnicodeDecodeError, TreeError):
            meta = None
        about = str((meta or {}).get("description") or "").strip()
        name = match[1] if kind == "skills" else f"/{match[1]}"
        found.append(f"- {name}{': ' + about if about else ''} ({target / rel})")
    if not found:
        return [f"Reef {kind}: none in this release."]
    if kind == "skills":
        intro = "Reef skills (read a skill's SKILL.md with the Read tool before you follow it):"
    else:
        intro = "Reef commands (when the user types /name, follow the instructions in its file):"
    more = len(found) - MAX_LISTED
    extra = [f"- … and {more} more under {target / kind}"] if more > 0 else []
    gone = f"Reef {kind} not listed here are no longer installed: do not use them."
    return [intro, *found[:MAX_LISTED], *extra, gone]

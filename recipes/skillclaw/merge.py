"""Lines of guidance, compared deterministically: what an edit loses, and merges that
keep everything.

Skills only grow: an edit may reword nothing away. Lines compare after whitespace is
collapsed and a list marker (``-``, ``*``, ``+``, ``3.``, ``3)``) is dropped, so a
renumbered step is the same step. A ``create_skill`` whose name is an existing skill's
(the same after normalising: case, spaces, underscores and hyphens aside) is merged into
it: the model's text is used when it keeps every line of the existing body; otherwise
the existing body is kept whole and the model's lines it lacks are appended below it
(numbered steps continue the existing numbering). A merge is never refused for losing
lines — by construction it cannot — only dropped when it adds nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MARKER = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")
_STEP = re.compile(r"^\s*(\d{1,3})([.)])\s+")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+\S")


def normal_name(name: str) -> str:
    """A name as kebab-case: ``Write Tests`` and ``write_tests`` -> ``write-tests``."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def same_name(a: str, b: str) -> bool:
    """Whether two skill names name the same skill (``writetests`` = ``write-tests``)."""
    return normal_name(a).replace("-", "") == normal_name(b).replace("-", "")


def line_key(line: str) -> str:
    """A line as compared: list marker dropped, whitespace collapsed, case kept."""
    return " ".join(_MARKER.sub("", line).split())


def _fence(line: str) -> bool:
    return line.strip().startswith("```")


def guidance(body: str) -> list[str]:
    """The non-empty lines of a body (code fence markers aside), as compared."""
    out = []
    for line in body.splitlines():
        key = line_key(line)
        if key and not _fence(line) and key not in out:
            out.append(key)
    return out


def items(body: str) -> list[str]:
    """The list items and numbered steps of a body, as compared."""
    return [line_key(line) for line in body.splitlines() if _ITEM.match(line)]


def lost_lines(old: str, new: str) -> list[str]:
    """Lines of ``old`` that ``new`` no longer has."""
    have = set(guidance(new))
    return [line for line in guidance(old) if line not in have]


def keeps_items(merged: str, *bodies: str) -> bool:
    """Whether ``merged`` holds every list item and step line of each of ``bodies``."""
    have = set(guidance(merged))
    return all(item in have for body in bodies for item in items(body))


@dataclass
class Merged:
    body: str
    used: str  # "model": its text kept everything; "appended": the existing body + its new lines
    appended: int  # lines of the model's text added below the existing body


def merge_bodies(existing: str, proposed: str) -> Merged:
    """``proposed`` merged into ``existing`` without losing a line of either."""
    if not lost_lines(existing, proposed):
        return Merged(proposed.strip(), "model", 0)
    have = set(guidance(existing))
    steps = [int(m.group(1)) for m in map(_STEP.match, existing.splitlines()) if m]
    number = max(steps, default=0)
    added: list[str] = []
    for line in proposed.splitlines():
        key = line_key(line)
        if not _fence(line) and (not key or key in have):
            continue  # fences always come along, so a code block stays closed
        have.add(key)
        step = _STEP.match(line)
        if step and steps:
            number += 1
            line = f"{number}{step.group(2)} {line[step.end() :]}"
        added.append(line.rstrip())
    body = existing.strip() + ("\n\n" + "\n".join(added) if added else "")
    return Merged(body, "appended", len(added))

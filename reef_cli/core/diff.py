"""File-by-file differences between two harness trees (for `reef harness diff`)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reef_cli.core.json_shape import field_dict


@dataclass(frozen=True)
class FileDiff:
    path: str
    status: str  # added | removed | modified
    added: int
    removed: int
    diff: str

    def to_json(self, with_diff: bool = True) -> dict[str, Any]:
        return field_dict(self, leave_out=() if with_diff else ("diff",))


def diff_trees(
    old: Mapping[str, str], new: Mapping[str, str], old_label: str = "a", new_label: str = "b"
) -> list[FileDiff]:
    """Unified diffs for every file that differs, sorted by path. Equal trees give []."""
    out: list[FileDiff] = []
    for path in sorted(set(old) | set(new)):
        before, after = old.get(path), new.get(path)
        if before == after:
            continue
        status = "added" if before is None else "removed" if after is None else "modified"
        lines = list(
            difflib.unified_diff(
                (before or "").splitlines(keepends=True),
                (after or "").splitlines(keepends=True),
                fromfile=f"{old_label}/{path}" if before is not None else "/dev/null",
                tofile=f"{new_label}/{path}" if after is not None else "/dev/null",
            )
        )
        text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
        added = sum(1 for ln in lines if ln.startswith("+") and not ln.startswith("+++"))
        removed = sum(1 for ln in lines if ln.startswith("-") and not ln.startswith("---"))
        out.append(FileDiff(path, status, added, removed, text))
    return out


def line_kind(line: str) -> str:
    """What one line of a unified diff is: ``meta`` (file header), ``add``, ``del``,
    ``hunk`` or ``""`` (context) — one reading for the terminal and the release page."""
    if line.startswith(("+++", "---")):
        return "meta"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "del"
    if line.startswith("@@"):
        return "hunk"
    return ""

"""Printing a release diff in colour: `reef harness diff` and `reef quickstart` share it."""

from __future__ import annotations

from reef_cli.cli._output import console, markup, safe
from reef_cli.core.diff import FileDiff, line_kind

STYLES = {"meta": "bold", "add": "green", "del": "red", "hunk": "cyan", "": ""}


def print_diff(changes: list[FileDiff], old: str, new: str, stat: bool = False) -> None:
    """Per-file unified diffs from tag ``old`` to ``new`` (``stat``: line counts only)."""
    out = console()
    if not changes:
        out.print(f"{old} and {new} have the same content.")
        return
    if stat:
        width = max(len(c.path) for c in changes)
        for c in changes:  # a path is the tree's text: escaped
            path = markup(f"{c.path:<{width}}")
            out.print(f" {path} | [green]+{c.added}[/] [red]-{c.removed}[/] ({c.status})")
        out.print(
            f" {len(changes)} file(s) changed, {sum(c.added for c in changes)} insertion(s), "
            f"{sum(c.removed for c in changes)} deletion(s)"
        )
        return
    from rich.text import Text

    for c in changes:  # Text is never markup; safe() spells out control characters
        out.print(Text(safe(f"{c.status}: {c.path}"), style="bold"))
        for line in c.diff.splitlines():
            out.print(Text(safe(line), style=STYLES[line_kind(line)]), soft_wrap=True)

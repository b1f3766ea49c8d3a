"""CONTRIBUTING.md's worked examples, read from the page so the tests run what it shows."""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "CONTRIBUTING.md"
_EXAMPLE = re.compile(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", re.S)
_EDIT = re.compile(r"<!-- edit: (\S+), (in|above) (\w+) -->\n```\w*\n(.*?)```", re.S)


def examples(prefix: str) -> dict[str, str]:
    """The files the page shows under ``prefix`` (a ``<!-- file: PATH -->`` line, then a
    fenced block), by path."""
    found = dict(_EXAMPLE.findall(PAGE.read_text()))
    return {path: body for path, body in found.items() if path.startswith(prefix)}


def edits(prefix: str) -> list[tuple[str, str, str, str]]:
    """The edits the page shows to Reef's own files under ``prefix`` (a ``<!-- edit: PATH,
    in NAME -->`` or ``<!-- edit: PATH, above NAME -->`` line, then a fenced block): (path,
    ``in`` or ``above``, the class or table named, the lines), in page order (the
    scorer's are under ``recipes/``, the store's under ``reef_cli/core/store/``)."""
    found = _EDIT.findall(PAGE.read_text())
    return [edit for edit in found if edit[0].startswith(prefix)]


def install(site: Path, prefix: str, distribution: str) -> None:
    """Write them under ``site`` with the METADATA pip would write beside them."""
    files = examples(prefix)
    assert any(p.endswith("entry_points.txt") for p in files), sorted(files)
    for path, body in files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(body)
    metadata = site / f"{prefix}-0.1.dist-info" / "METADATA"
    metadata.write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1\n")

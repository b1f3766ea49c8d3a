"""The docs stand alone: nothing a newcomer reads in the repository (README, docs/, the
code's docstrings and help texts) cites a design file that lives outside it. DESIGN.md
is the team's steering file beside the repository; a clone has no such file, so a
reference to it (or to ``../shared``) leads nowhere."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("reef_cli", "adapters", "recipes", "sandbox", "reefd")
OUTSIDE = re.compile(r"\bDESIGN(?:\.md)?\b|\.\./shared\b")


def _read() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for package in PACKAGES:
        files += sorted((ROOT / package).rglob("*.py"))
        files += sorted((ROOT / package).rglob("*.j2"))
    return [f for f in files if "node_modules" not in f.parts]


def cited_outside(text: str) -> list[str]:
    return OUTSIDE.findall(text)


def test_no_doc_or_docstring_cites_a_file_outside_the_repository() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _read()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if cited_outside(line)
    ]
    assert found == [], "cite a file in the repository instead:\n" + "\n".join(found)


def test_the_check_sees_a_citation() -> None:
    assert cited_outside("see DESIGN.md §2") and cited_outside("(DESIGN §10)")
    assert cited_outside("the layout in ../shared/DESIGN.md")
    assert not cited_outside("the design of the gate") and not cited_outside("REDESIGNED")

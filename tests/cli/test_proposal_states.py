"""A proposal's real state (pending, rejected, promoted) wherever releases are listed:
the chain keeps ``status: pending`` forever (releases never change), so each listing
reads the state from the rejections file and the promoting releases."""

from __future__ import annotations

import re
from pathlib import Path

from reef_cli.core import scenarios
from reef_cli.core.publishing import publish_files
from reef_cli.core.release_page import render_page
from tests.cli.helpers import reef, reef_fails, reef_json


def setup() -> None:
    """r1 live; r2, r3, r4 proposals held for review; then r2 rejected, r3 promoted (r5)."""
    scenarios.create("demo")
    publish_files("demo", {"rules/a.md": "Be brief.\n"}, reason="start")
    for n in (2, 3, 4):
        publish_files(
            "demo",
            {"rules/a.md": f"Be brief, take {n}.\n"},
            reason=f"proposal {n}",
            source="recipe:skillclaw",
            recipe="skillclaw",
            hold="review",
        )
    reef("harness", "reject", "2", "-s", "demo", "-m", "too vague")
    reef("harness", "promote", "3", "-s", "demo")


WANT = {1: "live", 2: "rejected", 3: "promoted", 4: "pending", 5: "live"}


def table_status(out: str) -> dict[int, str]:
    """``{release: status cell}`` from the `versions` table."""
    found = {}
    for line in out.splitlines():
        match = re.search(r"\br(\d+)\b(?: \(served\))?\s*│\s*(\w+)", line)
        if match:
            found[int(match[1])] = match[2]
    return found


def test_versions_table_and_json_show_the_real_state() -> None:
    setup()
    assert table_status(reef("harness", "versions", "-s", "demo")) == WANT
    data = reef_json("harness", "versions", "-s", "demo")
    # status stays what the chain says (keys are only ever added); proposal is the state
    assert {r["number"]: r["status"] for r in data["releases"]}[2] == "pending"
    states = {r["number"]: r.get("proposal") for r in data["releases"]}
    assert states == {1: None, 2: "rejected", 3: "promoted", 4: "pending", 5: None}
    assert [p["number"] for p in data["proposals"]] == [4]


def test_show_names_the_real_state() -> None:
    setup()
    for number, state in WANT.items():
        first = reef("harness", "show", str(number), "-s", "demo").splitlines()[0]
        assert first.split()[1] == state, first
        data = reef_json("harness", "show", str(number), "-s", "demo")
        assert data.get("proposal") == (state if number in (2, 3, 4) else None)


def test_release_page_badges_show_the_real_state() -> None:
    setup()
    html = render_page("demo", 2)
    assert '<h1>demo · r2 <span class="badge rejected">rejected</span></h1>' in html
    assert '<span class="badge promoted">promoted</span>' in html
    assert '<span class="badge pending">pending</span>' in html  # r4, still open


def test_a_missing_tree_is_not_found_not_refused_content(tree: Path, tmp_path: Path) -> None:
    """Exit 1 (not 3: nothing was refused), one line, and a fix naming what to do."""
    missing = tmp_path / "no-such-tree"
    line = reef_fails("harness", "publish", str(missing), "-s", "demo", "-m", "x")
    assert "does not exist" in line and "(fix: " in line and "reef harness init" in line
    line = reef_fails("harness", "check", str(missing))
    assert "does not exist" in line and "(fix: " in line
    a_file = tmp_path / "file.md"
    a_file.write_text("x")
    line = reef_fails("harness", "publish", str(a_file), "-s", "demo", "-m", "x")
    assert "not a directory" in line and "(fix: " in line
    assert scenarios.get("demo").chain().releases() == []

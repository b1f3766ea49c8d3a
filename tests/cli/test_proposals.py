"""Proposals: pending releases (held for review by ``publish: review``, or unreviewed
extension code) wait until `reef harness promote N` or `reef harness reject N`; the
listing, the rejection file and the errors, on a real git chain."""

from __future__ import annotations

from pathlib import Path

from reef_cli.core import scenarios
from reef_cli.core.publishing import publish_files
from tests.cli.helpers import reef, reef_fails, reef_json

EXTENSION = 'export default function (pi: any) {\n  pi.on("session_start", () => {});\n}\n'


def chain_of(name: str = "demo") -> list[tuple[int, str, str | None, int | None]]:
    return [
        (r.number, r.meta.status, r.meta.source, r.meta.points_to)
        for r in scenarios.get(name).chain().releases()
    ]


def setup() -> None:
    """r1 live; r2 a recipe's proposal held for review; r3 unreviewed extension code."""
    scenarios.create("demo")
    publish_files("demo", {"rules/a.md": "Be brief.\n"}, reason="start")
    publish_files(
        "demo",
        {"rules/a.md": "Be brief. Run the tests.\n"},
        reason="SkillClaw: 1 edit",
        source="recipe:skillclaw",
        recipe="skillclaw",
        hold="review",
    )
    publish_files(
        "demo",
        {"rules/a.md": "Be brief.\n", "extensions/hello.ts": EXTENSION},
        reason="an extension",
    )


def test_proposals_list_newest_first_with_why_they_wait() -> None:
    setup()
    assert chain_of() == [
        (1, "live", "publish", None),
        (2, "pending", "recipe:skillclaw", None),
        (3, "pending", "publish", None),
    ]
    data = reef_json("harness", "proposals", "-s", "demo")
    assert [(p["number"], p["held_for"]) for p in data["proposals"]] == [
        (3, "extension-review"),
        (2, "review"),
    ]
    out = reef("harness", "proposals", "-s", "demo")
    assert "r3 (extension code, publish): an extension" in out
    assert "r2 (held for review, recipe:skillclaw): SkillClaw: 1 edit" in out
    assert "reef harness reject N -s demo" in out
    # the /versions listing (`reef harness versions`) carries them too
    versions = reef_json("harness", "versions", "-s", "demo")
    assert versions["served"] == 1
    assert [p["number"] for p in versions["proposals"]] == [3, 2]
    assert "Proposals waiting for review (2):" in reef("harness", "versions", "-s", "demo")


def test_reject_then_promote_resolve_proposals_and_errors_change_nothing(
    reef_home: Path,
) -> None:
    setup()
    rejected_file = reef_home / "scenarios/demo/rejected.json"
    out = reef("harness", "reject", "2", "-s", "demo", "-m", "too vague")
    assert "Rejected r2 of demo; the served release is unchanged." in out
    assert rejected_file.stat().st_mode & 0o777 == 0o600
    data = reef_json("harness", "proposals", "-s", "demo")
    assert [p["number"] for p in data["proposals"]] == [3]
    assert chain_of()[-1] == (3, "pending", "publish", None)  # the chain is untouched
    assert reef_json("harness", "versions", "-s", "demo")["served"] == 1

    before = rejected_file.read_bytes()
    line = reef_fails("harness", "reject", "2", "-s", "demo")
    assert "r2 of demo was already rejected" in line
    line = reef_fails("harness", "reject", "1", "-s", "demo")
    assert "r1 of demo is not a proposal: it is live" in line
    line = reef_fails("harness", "reject", "9", "-s", "demo")
    assert "release r9 does not exist" in line
    line = reef_fails("harness", "reject", "2", "-s", "nowhere")
    assert "unknown scenario 'nowhere'" in line
    assert rejected_file.read_bytes() == before and len(chain_of()) == 3

    reef("harness", "promote", "3", "-s", "demo")
    assert chain_of()[-1] == (4, "live", "promote", 3)
    assert reef_json("harness", "proposals", "-s", "demo")["proposals"] == []
    assert "No proposals waiting in demo." in reef("harness", "proposals", "-s", "demo")
    line = reef_fails("harness", "reject", "3", "-s", "demo")
    assert "r3 of demo was already promoted (as r4)" in line
    assert rejected_file.read_bytes() == before and len(chain_of()) == 4


def test_a_first_rejection_leaves_no_file_behind_on_error(reef_home: Path) -> None:
    setup()
    reef_fails("harness", "reject", "latest-ish", "-s", "demo")
    reef_fails("harness", "reject", "1", "-s", "demo")
    assert not (reef_home / "scenarios/demo/rejected.json").exists()
    # a rejected proposal can still be promoted on purpose (a person changed their mind)
    reef("harness", "reject", "2", "-s", "demo")
    reef("harness", "promote", "2", "-s", "demo")
    assert chain_of()[-1] == (4, "live", "promote", 2)

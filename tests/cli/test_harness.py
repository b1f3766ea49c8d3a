from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import reef, reef_fails, reef_json


def publish(tree: Path, reason: str) -> dict:
    return reef_json("harness", "publish", str(tree), "-s", "demo", "--reason", reason)


def test_tour_publish_versions_diff_show_export_rollback(tree: Path, tmp_path: Path) -> None:
    first = publish(tree, "first")
    assert first["number"] == 1 and first["tag"] == "r1" and first["status"] == "live"
    (tree / "rules" / "bugs.md").write_text("Reproduce bugs with a failing test first.\n")
    second = publish(tree, "bugs first")
    assert second["parent"] == 1

    listing = reef_json("harness", "versions", "-s", "demo")
    assert listing["served"] == 2
    assert [r["number"] for r in listing["releases"]] == [2, 1]
    assert set(listing["releases"][0]) >= {
        "number",
        "tag",
        "commit",
        "parent",
        "source",
        "reason",
        "status",
        "gate",
        "content_hash",
        "created_at",
    }

    diff = reef_json("harness", "diff", "-s", "demo")
    assert (diff["from"], diff["to"]) == (1, 2)
    assert diff["files"][0]["path"] == "rules/bugs.md"
    assert diff["files"][0]["status"] == "added"
    assert "+Reproduce bugs" in diff["files"][0]["diff"]
    assert diff["summary"] == {"files": 1, "added": 1, "removed": 0}
    stat = reef_json("harness", "diff", "r1", "latest", "-s", "demo", "--stat")
    assert "diff" not in stat["files"][0]
    text = reef("harness", "diff", "previous", "latest", "-s", "demo")
    assert "added: rules/bugs.md" in text and "+Reproduce bugs" in text
    assert "1 file(s) changed, 1 insertion(s)" in reef(
        "harness", "diff", "1", "2", "-s", "demo", "--stat"
    )

    shown = reef_json("harness", "show", "2", "-s", "demo")
    assert "rules/bugs.md" in shown["files"] and shown["gate"]["verdict"] == "passed"
    assert "credential-scan" in reef("harness", "show", "r2", "-s", "demo")

    out = tmp_path / "exported"
    reef("harness", "export", "1", str(out), "-s", "demo")
    assert not (out / "rules" / "bugs.md").exists()
    assert (out / "rules" / "working-style.md").exists()

    assert "r3" in reef("harness", "rollback", "1", "-s", "demo")
    third = reef_json("harness", "show", "latest", "-s", "demo")
    assert third["points_to"] == 1 and third["source"] == "rollback"
    assert third["content_hash"] == first["content_hash"]
    assert "same content" in reef("harness", "diff", "1", "3", "-s", "demo")
    # no RELEASE: the release served before the current one (r2), so this undoes the rollback
    assert "r4 of demo with the content of r2 (rollback)" in reef(
        "harness", "rollback", "-s", "demo"
    )
    fourth = reef_json("harness", "show", "latest", "-s", "demo")
    assert fourth["points_to"] == 2 and fourth["content_hash"] == second["content_hash"]


def test_versions_table_and_default_scenario(tmp_path: Path) -> None:
    reef("config", "set", "default_scenario", "mine")
    reef("scenario", "create", "mine")
    root = tmp_path / "t"
    reef("harness", "init", str(root))
    reef("harness", "publish", str(root), "--reason", "hello")
    table = reef("harness", "versions")
    assert "r1 (served)" in table and "hello" in table


def test_extension_publishes_pending_then_promote(tree: Path) -> None:
    publish(tree, "first")
    (tree / "extensions").mkdir()
    (tree / "extensions" / "notify.ts").write_text("export default function () {}\n")
    pending = publish(tree, "adds an extension")
    assert pending["status"] == "pending"
    assert reef_json("harness", "versions", "-s", "demo")["served"] == 1
    reef("harness", "promote", "2", "-s", "demo")
    assert reef_json("harness", "versions", "-s", "demo")["served"] == 3


def test_check_lists_every_problem(tree: Path) -> None:
    (tree / "rules" / "Bad.md").write_text("x")
    (tree / "junk.txt").write_text("x")
    out = reef("harness", "check", str(tree), code=3)
    assert "Bad" in out and "junk.txt" in out


def test_check_passes_a_clean_tree(tree: Path) -> None:
    data = reef_json("harness", "check", str(tree))
    assert data["verdict"] == "passed"


def chain_state() -> str:
    return reef("harness", "versions", "-s", "demo", "--json")


@pytest.mark.parametrize(
    ("prepare", "args", "needle"),
    [
        (None, ["harness", "publish", "{tree}", "-s", "ghost", "-m", "x"], "unknown scenario"),
        (None, ["harness", "publish", "{tree}", "-s", "Bad_Name", "-m", "x"], "kebab-case"),
        ("frontmatter", ["harness", "publish", "{tree}", "-s", "demo", "-m", "x"], "frontmatter"),
        ("bigfile", ["harness", "publish", "{tree}", "-s", "demo", "-m", "x"], "over the"),
        ("binary", ["harness", "publish", "{tree}", "-s", "demo", "-m", "x"], "binary file"),
        ("symlink", ["harness", "publish", "{tree}", "-s", "demo", "-m", "x"], "symlinks"),
        (None, ["harness", "publish", "/nonexistent", "-s", "demo", "-m", "x"], "does not exist"),
        (None, ["harness", "show", "9", "-s", "demo"], "does not exist"),
        (None, ["harness", "rollback", "r7", "-s", "demo"], "does not exist"),
        (None, ["harness", "rollback", "-s", "demo"], "no earlier release to roll back to"),
        (None, ["harness", "diff", "1", "banana", "-s", "demo"], "is not a release"),
        (None, ["harness", "diff", "installed", "-s", "demo"], "no release is installed"),
        (None, ["scenario", "create", "demo"], "already exists"),
        (None, ["scenario", "delete", "ghost"], "unknown scenario"),
        (None, ["config", "set", "serve_port", "high"], "serve_port"),
    ],
)
def test_bad_input_is_one_line_nonzero_and_changes_nothing(
    tree: Path, prepare: str | None, args: list[str], needle: str
) -> None:
    publish(tree, "first")
    if prepare == "frontmatter":
        (tree / "skills" / "write-tests" / "SKILL.md").write_text("---\nname: [oops\n---\n")
    elif prepare == "bigfile":
        with (tree / "rules" / "huge.md").open("wb") as handle:
            handle.truncate(50 * 1024 * 1024)
    elif prepare == "binary":
        (tree / "rules" / "blob.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    elif prepare == "symlink":
        (tree / "rules" / "passwd.md").symlink_to("/etc/passwd")
    before = chain_state()
    code = 3 if prepare else 1  # refused content exits 3, other errors (a wrong path) 1
    line = reef_fails(*[a.replace("{tree}", str(tree)) for a in args], code=code)
    assert needle in line
    assert chain_state() == before


def test_config_file_with_wrong_type_is_one_line(reef_home: Path, tree: Path) -> None:
    (reef_home / "config.toml").write_text("publish_retries = 'many'\n")
    line = reef_fails("harness", "versions")  # reads config for the default scenario
    assert "publish_retries" in line and "config.toml" in line


def test_non_git_chain_folder(reef_home: Path, tree: Path) -> None:
    import shutil

    chain = reef_home / "scenarios" / "demo" / "chain.git"
    shutil.rmtree(chain)
    chain.mkdir()
    (chain / "keep.txt").write_text("x")
    line = reef_fails("harness", "publish", str(tree), "-s", "demo", "-m", "x")
    assert "not a bare git repository" in line
    assert [p.name for p in chain.iterdir()] == ["keep.txt"]


def test_secret_blocks_with_exit_3_and_never_prints_it(tree: Path) -> None:
    secret = "sk-proj-" + "Zq8xW3vB7nM2kL5jH9gF4dS1aP6oI0uY3tR8eW5qZ2xC7vB"
    (tree / "rules" / "env.md").write_text(f"Use the key\n\nOPENAI_API_KEY={secret}\n")
    line = reef_fails("harness", "publish", str(tree), "-s", "demo", "-m", "x", code=3)
    assert "rules/env.md:3" in line and "openai-api-key" in line
    assert secret not in line and secret[8:20] not in line
    assert reef_json("harness", "versions", "-s", "demo")["releases"] == []


def test_show_prints_release_text_literally_never_as_markup(tree: Path) -> None:
    reef("scenario", "create", "lit")
    reef("harness", "publish", str(tree), "-s", "lit", "--reason", "[red]alarm[/red] [bold]x")
    shown = reef("harness", "show", "1", "-s", "lit")
    assert "[red]alarm[/red] [bold]x" in shown

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reef_cli.core.errors import TreeError
from reef_cli.core.tree import (
    Limits,
    load_tree,
    parse_files,
    read_folder,
    split_frontmatter,
    starter_tree,
)


def write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


SKILL = "---\nname: fix-bugs\ndescription: Fix bugs test-first.\nlicense: MIT\n---\n# Fix\nbody\n"


def test_starter_tree_round_trips_byte_for_byte(tmp_path: Path) -> None:
    tree = starter_tree()
    tree.render(tmp_path / "t")
    again = load_tree(tmp_path / "t")
    assert again.files() == tree.files()
    assert again.content_hash() == tree.content_hash()
    assert again.summary() == {
        "rules": ["working-style"],
        "skills": ["write-tests"],
        "commands": ["review"],
        "extensions": [],
    }


def test_parse_keeps_extra_frontmatter_and_skill_files() -> None:
    files = {
        "skills/fix-bugs/SKILL.md": SKILL,
        "skills/fix-bugs/scripts/run.sh": "echo hi\n",
        "commands/ship.md": "---\ndescription: Ship it\nargument-hint: '[branch]'\n---\nGo.\n",
        "rules/style.md": "Be brief.\n",
        "extensions/notify.ts": "export default function () {}\n",
    }
    tree = parse_files(files)
    skill = tree.skills[0]
    assert skill.meta == {"license": "MIT"}
    assert skill.files == {"scripts/run.sh": "echo hi\n"}
    assert tree.commands[0].argument_hint == "[branch]"
    out = tree.files()
    assert out["skills/fix-bugs/SKILL.md"] == SKILL
    assert out["rules/style.md"] == "Be brief.\n"
    assert "reef.toml" in out


def test_content_hash_is_order_independent_and_content_sensitive() -> None:
    a = parse_files({"rules/a.md": "x\n", "rules/b.md": "y\n"})
    b = parse_files({"rules/b.md": "y\n", "rules/a.md": "x\n"})
    c = parse_files({"rules/a.md": "x\n", "rules/b.md": "z\n"})
    assert a.content_hash() == b.content_hash() != c.content_hash()


@pytest.mark.parametrize(
    ("files", "needle"),
    [
        ({"rules/Bad_Name.md": "x"}, "not kebab-case"),
        ({"rules/ok.md": ""}, "rule is empty"),
        ({"skills/a/SKILL.md": "no frontmatter"}, "needs frontmatter"),
        ({"skills/a/SKILL.md": "---\nname: a\n---\nbody"}, "non-empty 'description'"),
        ({"skills/a/SKILL.md": "---\nname: b\ndescription: d\n---\n"}, "differs from the folder"),
        ({"skills/a/notes.md": "x"}, "missing SKILL.md"),
        ({"commands/c.md": "---\ndescription: [unclosed\n---\n"}, "malformed frontmatter"),
        ({"commands/c.md": "---\ndescription: d\n"}, "never closed"),
        ({"commands/c.md": "just text"}, "need frontmatter"),
        ({"commands/c.md": "---\n- a list\n---\n"}, "must be a mapping"),
        ({"README.md": "hi"}, "unexpected entry"),
        ({"rules/nested/x.md": "hi"}, "rules must look like"),
        ({"reef.toml": "format = 2\n"}, "not supported"),
        ({"reef.toml": "format = 'one'\n"}, "format"),
        ({"reef.toml": "[requires]\nbinaries = 3\n"}, "requires.binaries"),
        ({"reef.toml": "format = = 1"}, "not valid TOML"),
        ({"rules/../../etc.md": "x"}, "escapes the tree"),
        ({"skills/a/SKILL.md": "---\nname: a\ndescription: " + "d" * 1100 + "\n---\n"}, "1024"),
    ],
)
def test_invalid_trees_name_the_problem(files: dict[str, str], needle: str) -> None:
    with pytest.raises(TreeError) as info:
        parse_files(files)
    assert needle in info.value.message
    assert "\n" not in info.value.one_line()


def test_every_problem_is_collected() -> None:
    with pytest.raises(TreeError) as info:
        parse_files({"rules/A.md": "x", "commands/c.md": "x", "junk.txt": "x"})
    assert len(info.value.problems) == 3
    assert "(and 2 more problem(s))" in info.value.message


def test_frontmatter_line_numbers_point_into_the_file() -> None:
    with pytest.raises(TreeError) as info:
        split_frontmatter("---\nname: a\ndescription: : :\n  bad: [\n---\n", "skills/a/SKILL.md")
    assert info.value.message.startswith("skills/a/SKILL.md:")


def test_read_folder_rejects_symlinks_binary_large_and_bad_utf8(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write(root, "rules/ok.md", "fine\n")
    os.symlink("/etc/passwd", root / "rules" / "passwd.md")
    os.symlink("/etc", root / "skills")
    write(root, "commands/bin.md", b"\x00\x01binary")
    write(root, "commands/latin.md", "caf\xe9".encode("latin-1"))
    big = root / "rules" / "big.md"
    with big.open("wb") as handle:  # 50 MB, sparse: never read because of the size check
        handle.truncate(50 * 1024 * 1024)
    with pytest.raises(TreeError) as info:
        read_folder(root)
    text = "\n".join(info.value.problems)
    assert "rules/passwd.md: symlinks are not allowed" in text
    assert "skills: symlinks are not allowed" in text
    assert "commands/bin.md: binary file" in text
    assert "commands/latin.md: not UTF-8" in text
    assert "rules/big.md: 52428800 bytes is over" in text


def test_tree_size_limit(tmp_path: Path) -> None:
    root = tmp_path / "t"
    for i in range(5):
        write(root, f"rules/r{i}.md", "x" * 1000)
    with pytest.raises(TreeError, match="over the 3000-byte limit"):
        read_folder(root, Limits(max_file_bytes=2000, max_tree_bytes=3000))


def test_missing_and_non_directory_roots(tmp_path: Path) -> None:
    with pytest.raises(TreeError, match="does not exist"):
        read_folder(tmp_path / "nope")
    write(tmp_path, "file", "x")
    with pytest.raises(TreeError, match="not a directory"):
        read_folder(tmp_path / "file")


def test_render_refuses_non_empty_destination(tmp_path: Path) -> None:
    write(tmp_path, "d/keep.txt", "mine")
    with pytest.raises(TreeError, match="not an empty directory"):
        starter_tree().render(tmp_path / "d")
    assert (tmp_path / "d" / "keep.txt").read_text() == "mine"

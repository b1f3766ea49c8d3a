from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from reef_cli.core.errors import TreeError, TreeNotFound
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
    """A wrong path is not found (exit 1); a symlinked root stays refused content."""
    with pytest.raises(TreeNotFound, match="does not exist"):
        read_folder(tmp_path / "nope")
    write(tmp_path, "file", "x")
    with pytest.raises(TreeNotFound, match="not a directory"):
        read_folder(tmp_path / "file")
    (tmp_path / "link").symlink_to(tmp_path)
    with pytest.raises(TreeError, match="symlink"):
        read_folder(tmp_path / "link")


def test_render_refuses_non_empty_destination(tmp_path: Path) -> None:
    write(tmp_path, "d/keep.txt", "mine")
    with pytest.raises(TreeError, match="not an empty directory"):
        starter_tree().render(tmp_path / "d")
    assert (tmp_path / "d" / "keep.txt").read_text() == "mine"


# ---------------------------------------------------------------- hardening (issue 11)


def skill_tree(root: Path) -> Path:
    write(root, "skills/x/SKILL.md", "---\nname: x\ndescription: d\n---\nbody\n")
    return root


def test_hardlink_to_a_file_outside_the_tree_is_refused(tmp_path: Path) -> None:
    outside = write(tmp_path, "outside/secret.txt", "root:x:0:0\n")
    root = skill_tree(tmp_path / "t")
    os.link(outside, root / "skills" / "x" / "passwd.txt")
    with pytest.raises(TreeError) as info:
        read_folder(root)
    [problem] = info.value.problems
    assert problem.startswith("skills/x/passwd.txt: is hardlinked (2 links)")
    assert "cp skills/x/passwd.txt skills/x/passwd.txt.copy && mv" in problem
    assert "root:x" not in info.value.one_line() and "\n" not in info.value.one_line()
    # the fix it names works: a copy has one link and reads fine
    path = root / "skills" / "x" / "passwd.txt"
    copy = path.with_name("passwd.txt.copy")
    copy.write_bytes(path.read_bytes())
    copy.replace(path)
    assert read_folder(root)["skills/x/passwd.txt"] == "root:x:0:0\n"


def test_fifo_socket_and_device_are_refused_without_blocking(tmp_path: Path) -> None:
    import socket

    root = skill_tree(tmp_path / "t")
    os.mkfifo(root / "skills" / "x" / "pipe.md")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "skills" / "x" / "sock.md"))
    try:
        os.mknod(root / "skills" / "x" / "null.md", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        device = True
    except PermissionError:
        device = False
    try:
        with pytest.raises(TreeError) as info:
            read_folder(root)  # a FIFO opened for reading would block here forever
    finally:
        sock.close()
    text = "\n".join(info.value.problems)
    assert "skills/x/pipe.md: is a FIFO (named pipe), not a regular file (remove it)" in text
    assert "skills/x/sock.md: is a socket, not a regular file" in text
    if device:
        assert "skills/x/null.md: is a character device, not a regular file" in text


def test_a_file_swapped_after_the_first_look_is_checked_again(tmp_path: Path) -> None:
    """The open itself refuses what lstat no longer describes: a FIFO is opened without
    blocking and refused by fstat, a symlink is not followed, a hardlink is caught."""
    from reef_cli.core.tree import _read_regular

    os.mkfifo(tmp_path / "pipe")
    os.symlink("/etc/passwd", tmp_path / "link")
    write(tmp_path, "plain", "x")
    os.link(tmp_path / "plain", tmp_path / "linked")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    device = os.fstat(fd).st_dev
    try:
        with pytest.raises(TreeError, match="FIFO"):
            _read_regular("pipe", "pipe", fd, device, 1024)
        with pytest.raises(TreeError, match="symlinks are not allowed"):
            _read_regular("link", "link", fd, device, 1024)
        with pytest.raises(TreeError, match="hardlinked"):
            _read_regular("linked", "linked", fd, device, 1024)
    finally:
        os.close(fd)


def test_bad_file_names_are_named_printably(tmp_path: Path) -> None:
    root = skill_tree(tmp_path / "t")
    skill = os.fsencode(root / "skills" / "x")
    for name in (b"caf\xe9.md", b"two\nlines.md", b"tab\there.md", "rtl\u202etxt.md".encode()):
        with open(os.path.join(skill, name), "wb") as handle:
            handle.write(b"x")
    with pytest.raises(TreeError) as info:
        read_folder(root)
    problems = info.value.problems
    assert "skills/x/caf\\xe9.md: file name is not UTF-8 (rename it)" in problems
    assert any(p.startswith("skills/x/two\\nlines.md: file name holds a control") for p in problems)
    assert any(p.startswith("skills/x/tab\\there.md: file name holds a control") for p in problems)
    assert any(p.startswith("skills/x/rtl\\u202etxt.md: file name holds") for p in problems)
    assert len(problems) == 4
    line = info.value.one_line()
    line.encode("utf-8")  # printable: no lone surrogates
    assert "\n" not in line and "\t" not in line


def test_scan_folder_reads_what_it_can_and_lists_every_problem(tmp_path: Path) -> None:
    from reef_cli.core.tree import scan_folder

    root = skill_tree(tmp_path / "t")
    write(root, "rules/ok.md", "fine\n")
    os.mkfifo(root / "rules" / "pipe.md")
    os.symlink("/etc/passwd", root / "rules" / "passwd.md")
    write(root, "rules/latin.md", "caf\xe9".encode("latin-1"))
    found = scan_folder(root)
    assert set(found.files) == {"skills/x/SKILL.md", "rules/ok.md"}
    assert found.refused == {"rules/pipe.md", "rules/passwd.md", "rules/latin.md"}
    assert len(found.problems) == 3
    assert any("re-save it as UTF-8" in p for p in found.problems)


def test_folders_nested_too_deep_are_refused(tmp_path: Path) -> None:
    from reef_cli.core.tree import MAX_DEPTH

    root = skill_tree(tmp_path / "t")
    deep = root / "skills" / "x" / "/".join(["d"] * (MAX_DEPTH + 5))
    write(deep, "note.md", "x")
    with pytest.raises(TreeError, match=f"nested deeper than {MAX_DEPTH} folders"):
        read_folder(root)


@pytest.mark.parametrize(
    ("files", "needle"),
    [
        ({"rules/a.md": "caf\udce9"}, "rules/a.md: not UTF-8 text"),
        ({"skills/x/SKILL.md": "", "skills/x/caf\udce9.md": "x"}, "caf\\xe9.md: file name is"),
        ({"rules/a\nb.md": "x"}, "rules/a\\nb.md: file name holds a control"),
        ({"rules/./a.md": "x"}, "not a plain relative path"),
        ({"reef.toml": "a = " + "[" * 5000 + "]" * 5000}, "reef.toml: nested too deeply"),
        ({"reef.toml": "requires = 3\n"}, "reef.toml: requires:"),
        ({"reef.toml": "[requires.deep.er]\nx = 1\n"}, "reef.toml: requires.deep"),
        (
            {"skills/y/SKILL.md": "---\nname: y\ndescription: d\nk: " + "[" * 5000 + "\n---\n"},
            "skills/y/SKILL.md:2: frontmatter is nested too deeply",
        ),
        (
            {"skills/y/SKILL.md": "---\nname: y\ndescription: d\nk: " + "[" * 30 + "]" * 30},
            "never closed",
        ),
        (
            {
                "skills/y/SKILL.md": "---\nname: y\ndescription: d\nk: "
                + "[" * 30
                + "]" * 30
                + "\n---\n"
            },
            "nested deeper than 16 levels",
        ),
        (
            {"commands/c.md": "---\ndescription: d\nk: &a [*a]\n---\nbody\n"},
            "nested deeper than 16 levels",
        ),
        (
            {
                "commands/c.md": "---\ndescription: d\na: &a [x,x,x,x,x,x,x,x,x]\n"
                + "".join(
                    f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n"
                    for i in range(8)
                )
                + "---\nbody\n"
            },
            "more than 10000 values",
        ),
    ],
)
def test_hostile_content_is_a_tree_error_not_a_traceback(
    files: dict[str, str], needle: str
) -> None:
    with pytest.raises(TreeError) as info:
        parse_files(files)
    assert any(needle in p for p in info.value.problems), info.value.problems
    line = info.value.one_line()
    line.encode("utf-8")
    assert "\n" not in line


def test_manifest_lists_every_field_problem() -> None:
    with pytest.raises(TreeError) as info:
        parse_files({"reef.toml": "format = 'one'\nextra = 1\n"})
    assert len(info.value.problems) == 2


def test_content_hash_of_a_bad_name_is_a_tree_error() -> None:
    from reef_cli.core.tree import content_hash

    with pytest.raises(TreeError, match="not UTF-8"):
        content_hash({"skills/x/caf\udce9.md": "x"})

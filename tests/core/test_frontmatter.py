"""The one frontmatter reader and writer (reef_cli/core/frontmatter.py): each rule, and
each former parser's caller reading the same text the same way."""

from __future__ import annotations

from typing import Any

import pytest

from reef_cli.core.errors import TreeError
from reef_cli.core.frontmatter import (
    BOM,
    Frontmatter,
    read_frontmatter,
    split_frontmatter,
    with_frontmatter,
)
from reef_cli.core.tree import parse_files

REL = "skills/a/SKILL.md"


def read(text: str) -> Frontmatter:
    return read_frontmatter(text, REL)


def refused(text: str) -> TreeError:
    with pytest.raises(TreeError) as info:
        read(text)
    error = info.value
    assert error.message.startswith(f"{REL}:")  # names the file (and the line)
    assert "\n" not in error.one_line()
    return error


# ----------------------------------------------------------------- no frontmatter


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Just a rule.\n",
        "\n---\nname: a\n---\nbody\n",  # a blank line first: no block
        "--- \nname: a\n---\nbody\n",  # trailing space on the opening line
        "----\nname: a\n---\nbody\n",
        "---",  # a lone --- with no line end is a markdown rule, not a block
        "---name: a\n---\n",
        "# Title\n---\nname: a\n---\n",
    ],
)
def test_a_file_without_an_opening_line_has_no_frontmatter(text: str) -> None:
    assert read(text) == Frontmatter(None, "", text)
    assert split_frontmatter(text, REL) == (None, text)


def test_a_bom_without_a_block_is_left_in_the_body() -> None:
    text = BOM + "Be brief.\n"
    assert read(text) == Frontmatter(None, "", text)


# ----------------------------------------------------------------- the block


def test_a_block_gives_its_mapping_the_head_and_the_body() -> None:
    text = "---\nname: a\ndescription: Do it.\n---\n# A\nbody\n"
    found = read(text)
    assert found.meta == {"name": "a", "description": "Do it."}
    assert found.head == "---\nname: a\ndescription: Do it.\n---\n"
    assert found.body == "# A\nbody\n"


def test_a_bom_before_the_opening_line_is_part_of_the_head() -> None:
    text = BOM + "---\nname: a\n---\nbody\n"
    found = read(text)
    assert found.meta == {"name": "a"}
    assert found.head == BOM + "---\nname: a\n---\n"
    assert found.body == "body\n"


def test_crlf_line_ends_read_like_lf_and_the_body_keeps_its_bytes() -> None:
    text = "---\r\nname: a\r\ndescription: d\r\n---\r\nline one\r\nline two\r\n"
    found = read(text)
    assert found.meta == {"name": "a", "description": "d"}
    assert found.body == "line one\r\nline two\r\n"
    assert read("---\nname: a\r\n---\r\nbody") == Frontmatter(
        {"name": "a"}, "---\nname: a\r\n---\r\n", "body"
    )


def test_the_closing_line_may_end_the_file() -> None:
    assert read("---\nname: a\n---") == Frontmatter({"name": "a"}, "---\nname: a\n---", "")


def test_dashes_in_the_body_are_the_bodys() -> None:
    text = "---\nname: a\n---\nabove\n---\nbelow\n---\n"
    found = read(text)
    assert found.meta == {"name": "a"}
    assert found.body == "above\n---\nbelow\n---\n"


@pytest.mark.parametrize(
    "text",
    [
        "---\nname: a\n----\nbody\n",
        "---\nname: a\n--- x\nbody\n",
        "---\nname: a\n --- \nbody\n",
        "---\nname: a\n---\rbody\n",  # a lone \r ends no line
        "---\nname: a\f---\nbody\n",  # nor does a form feed
        "---\nname: a\u2028---\nbody\n",  # nor a Unicode line separator
    ],
)
def test_only_a_line_that_is_exactly_dashes_closes_the_block(text: str) -> None:
    assert "never closed" in refused(text).message


@pytest.mark.parametrize("raw", ["", "\n", "# only a comment\n", "  \n# a\n# b\n", "~\n"])
def test_an_empty_block_or_only_comments_is_an_empty_mapping(raw: str) -> None:
    found = read(f"---\n{raw}---\nbody\n")
    assert found.meta == {}
    assert found.body == "body\n"


def test_keys_are_text() -> None:
    assert read("---\n1: one\n2.5: x\n---\n").meta == {"1": "one", "2.5": "x"}


@pytest.mark.parametrize(
    "text", ["---\nname: a\n", "---\nname: a\n--- \nbody\n", "---\r\nname: a\r\n", "---\n"]
)
def test_an_unterminated_block_is_refused(text: str) -> None:
    error = refused(text)
    assert error.message == f"{REL}:1: frontmatter opened with --- but never closed"
    assert error.hint


@pytest.mark.parametrize("raw", ["- a\n- b\n", "just words\n", "42\n", "'text'\n"])
def test_yaml_that_is_not_a_mapping_is_refused(raw: str) -> None:
    error = refused(f"---\n{raw}---\nbody\n")
    assert error.message == f"{REL}:2: frontmatter must be a mapping of key: value"


def test_malformed_yaml_is_refused_with_its_line() -> None:
    error = refused("---\nname: a\ndescription: [unclosed\nlicense: MIT\n---\nbody\n")
    assert "malformed frontmatter" in error.message
    assert error.message.startswith(f"{REL}:4: malformed frontmatter")


@pytest.mark.parametrize(
    "raw",
    [
        "date: 2024-02-30\n",  # a date YAML builds with datetime: ValueError, not YAMLError
        "at: 2024-01-01 25:00:00\n",
        "n: !!int 0x\n",
        "? [1, 2]\n: x\n",  # an unhashable key
        "a: !!python/object:os.system x\n",
    ],
)
def test_values_yaml_cannot_build_are_refused_not_a_traceback(raw: str) -> None:
    error = refused(f"---\n{raw}---\nbody\n")
    assert "malformed frontmatter" in error.message


def test_deep_nesting_and_alias_bombs_are_refused() -> None:
    deep = "a: " + "[" * 40 + "]" * 40 + "\n"
    assert "nested deeper" in refused(f"---\n{deep}---\n").message
    bomb = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    bomb += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 6)]
    assert "more than" in refused("---\n" + "\n".join(bomb) + "\n---\n").message


@pytest.mark.parametrize(
    "text",
    [
        "plain\n",
        BOM + "---\nname: a\n---\nbody",
        "---\r\nname: a\r\n---\r\n\r\nbody\r\n",
        "---\n---\n",
        "---\nname: a\n---",
        "---\nname: a\n---\n---\nmore\n",
    ],
)
def test_head_and_body_are_the_whole_file(text: str) -> None:
    found = read(text)
    assert found.head + found.body == text


# ----------------------------------------------------------------- the writer


def test_the_writer_emits_keys_in_order_one_line_each_utf8_as_is() -> None:
    text = with_frontmatter({"name": "a", "description": "Café — " + "x" * 200}, "body\n")
    assert text == f"---\nname: a\ndescription: Café — {'x' * 200}\n---\nbody\n"
    assert read(text) == Frontmatter(
        {"name": "a", "description": "Café — " + "x" * 200}, text[: -len("body\n")], "body\n"
    )


def test_an_empty_mapping_writes_the_body_alone() -> None:
    assert with_frontmatter({}, "Be brief.\n") == "Be brief.\n"


@pytest.mark.parametrize("body", ["---\nnot: meta\n---\nrest\n", "---\r\nx\n", BOM + "---\nx\n"])
def test_a_body_that_would_read_as_a_block_reads_back_as_written(body: str) -> None:
    text = with_frontmatter({}, body)
    assert read(text) == Frontmatter({}, "---\n---\n", body)
    meta: dict[str, Any] = {"description": "d"}
    assert read(with_frontmatter(meta, body)).body == body


# ----------------------------------------------------------------- every former caller

# Texts on which the former parsers (tree.py, quality.py, adapters/pi) disagreed: each
# caller now sees the body and the description ``read_frontmatter`` gives.
SAME = [
    "---\ndescription: Plain block.\n---\nDo the thing.\n",
    "---\r\ndescription: CRLF block.\r\n---\r\nDo the thing.\r\n",
    BOM + "---\ndescription: BOM block.\n---\nDo the thing.\n",
    "---\ndescription: Dashes below.\n---\nDo the thing.\n---\nand more.\n",
    "---\n# no keys\n---\nDo the thing without a description.\n",
]


def _description(text: str, rel: str) -> str:
    meta = split_frontmatter(text, rel)[0] or {}
    return str(meta.get("description") or "")


@pytest.mark.parametrize("text", SAME)
def test_tree_parses_the_same_text_the_same_way(text: str) -> None:
    tree = parse_files({"rules/r.md": text})
    meta, body = split_frontmatter(text, "rules/r.md")
    assert tree.rules[0].body == body and tree.rules[0].meta == meta
    if _description(text, "commands/c.md"):
        command = parse_files({"commands/c.md": text}).commands[0]
        assert (command.description, command.body) == (_description(text, "x"), body)


@pytest.mark.parametrize("text", SAME)
def test_quality_parses_the_same_text_the_same_way(text: str) -> None:
    from recipes import quality

    written = quality.written_of({"commands/c.md": text}, "command", "c", "commands/c.md", "w")
    body = split_frontmatter(text, "commands/c.md")[1]
    assert (written.description, written.body) == (_description(text, "x"), body.strip())


def test_quality_reads_no_frontmatter_in_an_extension() -> None:
    from recipes import quality

    source = "---\nnot yaml: [\n---\nexport default {}\n"
    written = quality.written_of(
        {"extensions/e.ts": source}, "extension", "e", "extensions/e.ts", "w"
    )
    assert written.body == source.strip()


@pytest.mark.parametrize("text", SAME)
def test_pi_parses_the_same_text_the_same_way(text: str) -> None:
    from adapters.base import ReleaseToInstall
    from adapters.pi.render import agents_section

    section = agents_section(ReleaseToInstall("demo", 1, {"rules/r.md": text}, "sha256:1"))
    body = split_frontmatter(text, "rules/r.md")[1]
    assert body.strip() in section
    assert "description:" not in section


@pytest.mark.parametrize("text", SAME)
def test_skillclaw_parses_the_same_text_the_same_way(text: str) -> None:
    from recipes.skillclaw.skills import skills_of

    path = "skills/a/SKILL.md"
    skill = skills_of({path: text})["a"]
    found = read_frontmatter(text, path)
    assert (skill.description, skill.body) == (_description(text, path), found.body)
    kept = skill.with_body("New body.").render()  # the head is kept byte for byte
    assert kept == found.head + "\nNew body.\n"
    changed = skill.with_description("New description.").render()
    assert read_frontmatter(changed, path).meta == {
        **(found.meta or {}),
        "description": "New description.",
    }


@pytest.mark.parametrize("text", SAME)
def test_task_runners_parse_the_same_text_the_same_way(text: str) -> None:
    from recipes.tasks.runners import render_harness

    body = split_frontmatter(text, "rules/r.md")[1]
    assert render_harness({"rules/r.md": text}) == body.strip()
    shown = render_harness({"skills/a/SKILL.md": text})
    description = _description(text, "x")
    assert (
        shown == "## Skill: a" + (f"\n{description}" if description else "") + f"\n\n{body.strip()}"
    )


@pytest.mark.parametrize("text", SAME)
def test_reefine_follow_parses_the_same_text_the_same_way(text: str) -> None:
    from recipes.reefine.follow import render

    body = split_frontmatter(text, "commands/c.md")[1]
    description = _description(text, "x")
    head = "## Command /c" + (f"\n{description}" if description else "")
    assert render({"commands/c.md": text}) == (
        f"{head}\nWhen the developer types /c, do this:\n{body.strip()}"
    )


@pytest.mark.parametrize("text", SAME)
def test_gepa_parses_the_same_text_the_same_way(text: str) -> None:
    from recipes.gepa.components import Layout, split_head

    found = read_frontmatter(text, "rules/r.md")
    assert split_head(text, "rules/r.md") == (found.head, found.body)
    layout = Layout.of({"rules/r.md": text})
    assert layout.seed == {"rules/r.md": found.body.strip()}
    rewritten = layout.tree({"rules/r.md": "Rewritten."})["rules/r.md"]
    assert rewritten.startswith(found.head) and read_frontmatter(rewritten, "x").meta == found.meta


def test_gepa_puts_a_body_opening_with_dashes_back_so_it_reads_back() -> None:
    from recipes.gepa.components import Layout

    layout = Layout.of({"rules/r.md": "Plain rule.\n"})
    out = layout.tree({"rules/r.md": "---\nA rule under a markdown rule.\n"})["rules/r.md"]
    assert parse_files({"rules/r.md": out}).rules[0].body == "---\nA rule under a markdown rule.\n"


@pytest.mark.parametrize("kind", ["rule", "skill", "command"])
def test_reefine_drafts_read_back_through_the_one_reader(kind: str) -> None:
    from recipes.reefine.draft import Draft, apply_draft

    body = "---\nA body opening with a markdown rule, then the steps.\n"
    draft = Draft(kind=kind, name="do-it", description="Café, then tests.", body=body, why="asked")
    files, change = apply_draft({}, draft)
    tree = parse_files(files)
    parsed = {"rule": tree.rules, "skill": tree.skills, "command": tree.commands}[kind][0]
    assert parsed.body.strip() == body.strip()
    if kind != "rule":
        assert "Café" in files[change.path]  # written as UTF-8, not escaped
        described = tree.skills if kind == "skill" else tree.commands
        assert described[0].description == "Café, then tests."


def test_the_adapters_write_frontmatter_the_one_reader_reads() -> None:
    from adapters.claude_code.render import versions_command
    from adapters.codex.render import command_skill, versions_skill
    from reef_cli.core.tree import Command

    claude = read_frontmatter(versions_command("demo"), "commands/versions.md")
    assert claude.meta is not None and claude.meta["disable-model-invocation"] is True
    codex = read_frontmatter(versions_skill("demo"), "skills/versions/SKILL.md")
    assert codex.meta is not None and codex.meta["name"] == "versions"
    command = Command(name="ship", description="Ship it", argument_hint="[branch]", body="Go.\n")
    skill = read_frontmatter(command_skill(command), "skills/ship/SKILL.md")
    assert skill.meta == {"name": "ship", "description": "Ship it (arguments: [branch])"}

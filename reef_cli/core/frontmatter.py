"""Markdown frontmatter: the one reader and the one writer of a ``---`` YAML block.

Rules, skills and commands (``rules/<n>.md``, ``skills/<n>/SKILL.md``,
``commands/<n>.md``) may open with a YAML mapping between two ``---`` lines. Every part
of Reef reads that block here — the tree's validation, the quality gate, the recipes and
the adapters — so a file means the same thing everywhere:

- **no frontmatter**: a file has a block only when its first line is exactly ``---``
  (ended by ``\\n`` or ``\\r\\n``); otherwise ``meta`` is ``None`` and the body is the
  whole text, unchanged (leading blank lines, ``--- `` with a trailing space or ``----``
  open nothing);
- **BOM**: one UTF-8 byte-order mark before that first ``---`` is allowed (editors on
  Windows write one); it belongs to ``head``, not to the body or the YAML;
- **end of the block**: the first later line that is exactly ``---`` (ended by ``\\n``,
  ``\\r\\n`` or the end of the text). Only ``\\n`` ends a line: a lone ``\\r``, a form feed
  or a Unicode line separator does not;
- **unterminated**: an opening ``---`` with no closing line is an error
  (``TreeError``, ``<file>:1: frontmatter opened with --- but never closed``);
- **YAML**: parsed with ``yaml.safe_load``. Empty, or only comments: ``{}``. A mapping:
  its keys as text. Anything else (a list, a bare string), malformed YAML or a value
  YAML cannot build (``date: 2024-02-30``): a ``TreeError`` naming ``<file>:<line>``;
  nested deeper than ``MAX_NESTING`` or over ``MAX_NODES`` values (aliases expanded):
  a ``TreeError`` too;
- **CRLF**: ``\\r\\n`` line ends are read like ``\\n``; the body keeps its own bytes;
- **body**: everything after the closing line, byte for byte (no stripping), so a
  ``---`` line further down (a markdown rule) is the body's;
- **head**: the block verbatim, BOM and both ``---`` lines included (``""`` when there
  is none): ``head + body == text`` always, so a caller can put a body back under the
  head it came with.

The writer (``with_frontmatter``) emits ``---\\n<YAML>---\\n<body>``, keys in order, one
line each, UTF-8 as is; an empty mapping writes the body alone, unless the body itself
would read as a block, which then gets an empty ``---\\n---\\n`` block in front so it
reads back as it was written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from reef_cli.core.errors import TreeError

FENCE = "---"
BOM = "\ufeff"
MAX_NESTING = 16
MAX_NODES = 10_000


@dataclass(frozen=True)
class Frontmatter:
    """One markdown file split: ``meta`` (``None`` when it has no block), the block as
    written (``head``) and the rest (``body``); ``head + body`` is the file."""

    meta: dict[str, Any] | None
    head: str
    body: str


def _is_fence(line: str) -> bool:
    """``line`` (with its ending, if any) is exactly ``---``."""
    return line in ("---\n", "---\r\n", "---")


def opens_block(text: str) -> bool:
    """Whether ``text`` starts a frontmatter block (first line ``---``, a BOM allowed)."""
    text = text.removeprefix(BOM)
    return text.startswith(("---\n", "---\r\n"))


def read_frontmatter(text: str, rel: str) -> Frontmatter:
    """Split ``text`` (the file ``rel``) by the rules above; ``TreeError`` on a bad block."""
    if not opens_block(text):
        return Frontmatter(None, "", text)
    start = text.index("\n") + 1  # after the opening line (and the BOM before it)
    pos = start
    while pos < len(text):
        end = text.find("\n", pos)
        stop = len(text) if end == -1 else end + 1
        if _is_fence(text[pos:stop]):
            raw, head, body = text[start:pos], text[:stop], text[stop:]
            return Frontmatter(_load(raw, rel), head, body)
        pos = stop
    raise TreeError(
        f"{rel}:1: frontmatter opened with --- but never closed",
        "end the block with a line that is just ---",
    )


def split_frontmatter(text: str, rel: str) -> tuple[dict[str, Any] | None, str]:
    """(meta, body) of the file ``rel``; meta is ``None`` when it has no frontmatter."""
    found = read_frontmatter(text, rel)
    return found.meta, found.body


def _load(raw: str, rel: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 2
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise TreeError(f"{rel}:{line}: malformed frontmatter ({problem})") from exc
    except RecursionError as exc:
        raise TreeError(
            f"{rel}:2: frontmatter is nested too deeply (keep it to a few levels of key: value)"
        ) from exc
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. date: 2024-02-30
        problem = " ".join(str(exc).split()) or type(exc).__name__
        raise TreeError(f"{rel}:2: malformed frontmatter ({problem})") from exc
    if data is None:  # an empty block, or only comments
        return {}
    if not isinstance(data, dict):
        raise TreeError(f"{rel}:2: frontmatter must be a mapping of key: value")
    check_shape(data, f"{rel}:2: frontmatter")
    return {str(k): v for k, v in data.items()}


def check_shape(data: object, what: str) -> None:
    """Refuse structures nested deeper than ``MAX_NESTING`` or with more than ``MAX_NODES``
    values counting every alias expansion (YAML anchors can make a few lines into a
    billion values, or a cycle): rendering, hashing or JSON would recurse without end."""
    stack: list[tuple[object, int]] = [(data, 1)]
    nodes = 0
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise TreeError(f"{what} has more than {MAX_NODES} values (expanded aliases count)")
        if isinstance(value, dict):
            children: list[object] = [*value.keys(), *value.values()]
        elif isinstance(value, (list, tuple, set, frozenset)):
            children = list(value)
        else:
            continue
        if depth >= MAX_NESTING and children:
            raise TreeError(f"{what} is nested deeper than {MAX_NESTING} levels")
        stack.extend((child, depth + 1) for child in children)


# ---------------------------------------------------------------- writing


def dump_frontmatter(meta: Mapping[str, Any]) -> str:
    """The YAML between the two ``---`` lines: keys in order, one line each, UTF-8 as is."""
    return yaml.safe_dump(dict(meta), sort_keys=False, allow_unicode=True, width=1000)


def with_frontmatter(meta: Mapping[str, Any], body: str) -> str:
    """``body`` under a ``---`` block holding ``meta``; the body alone when ``meta`` is
    empty (with an empty block in front if the body would otherwise read as one)."""
    if not meta:
        return f"{FENCE}\n{FENCE}\n{body}" if opens_block(body) else body
    return f"{FENCE}\n{dump_frontmatter(meta)}{FENCE}\n{body}"

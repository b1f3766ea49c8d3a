"""Just enough JSONC to edit a person's opencode config in place.

opencode reads ``opencode.json``/``opencode.jsonc`` with comments (``//``, ``/* */``) and
trailing commas allowed. Reef changes two members (``provider.reef`` and ``model``); every
other byte of the file — comments, order, indentation — must stay as the person wrote it,
so edits are splices into the original text at positions found by scanning it, never a
re-serialisation of the whole file.

``blank`` turns JSONC into strict JSON of the same length (comments and trailing commas
become spaces, newlines stay), so ``json`` finds values and every offset it reports is an
offset into the original text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

_WS = " \t\r\n"


class JsoncError(ValueError):
    """The text is not JSONC (an unterminated string or comment, or invalid JSON)."""


@dataclass(frozen=True)
class Member:
    key: str
    key_start: int  # the opening quote of the key
    value_start: int
    value_end: int  # one past the value
    comma: int | None  # the comma after the value (None for the last member)
    value: Any = None


@dataclass(frozen=True)
class Obj:
    open: int  # the ``{``
    close: int  # the ``}``
    members: list[Member] = field(default_factory=list)

    def get(self, key: str) -> Member | None:
        """The member called ``key`` (the last one when a key repeats, as opencode reads it)."""
        found = [m for m in self.members if m.key == key]
        return found[-1] if found else None


def blank(text: str) -> str:
    """``text`` with comments and trailing commas replaced by spaces (same length)."""
    out = list(text)
    i, n = 0, len(text)
    pending: int | None = None  # a comma that is trailing if a closing bracket comes next
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                if text[j] == "\n":
                    raise JsoncError(f"unterminated string at offset {i}")
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                raise JsoncError(f"unterminated string at offset {i}")
            pending = None
            i = j + 1
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j == -1 else j
            out[i:j] = " " * (j - i)
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j == -1:
                raise JsoncError(f"unterminated comment at offset {i}")
            out[i : j + 2] = [ch if ch in "\r\n" else " " for ch in text[i : j + 2]]
            i = j + 2
            continue
        if c == ",":
            pending = i
        elif c in "}]":
            if pending is not None:
                out[pending] = " "
            pending = None
        elif c == "\ufeff":
            out[i] = " "
        elif c not in _WS:
            pending = None
        i += 1
    return "".join(out)


def loads(text: str) -> Any:
    """The value a JSONC text holds; ``JsoncError`` when it is not JSONC."""
    try:
        return json.loads(blank(text))
    except ValueError as exc:
        raise JsoncError(str(exc)) from exc


def _skip(b: str, i: int) -> int:
    while i < len(b) and b[i] in _WS:
        i += 1
    return i


def _object_at(b: str, i: int) -> Obj:
    decoder = json.JSONDecoder()
    i = _skip(b, i)
    if i >= len(b) or b[i] != "{":
        raise JsoncError(f"expected an object at offset {i}")
    start, i = i, i + 1
    members: list[Member] = []
    while True:
        i = _skip(b, i)
        if i < len(b) and b[i] == "}":
            return Obj(start, i, members)
        key_start = i
        try:
            key, i = decoder.raw_decode(b, i)
            i = _skip(b, i)
            if b[i] != ":":
                raise ValueError("expected ':'")
            value_start = _skip(b, i + 1)
            value, value_end = decoder.raw_decode(b, value_start)
        except (ValueError, IndexError) as exc:
            raise JsoncError(f"invalid object member at offset {key_start}") from exc
        i = _skip(b, value_end)
        comma = i if i < len(b) and b[i] == "," else None
        members.append(Member(str(key), key_start, value_start, value_end, comma, value))
        if comma is not None:
            i += 1


def find(text: str, path: tuple[str, ...] = ()) -> Obj | None:
    """The object at ``path`` (keys from the root), or None when a key is missing;
    ``JsoncError`` when the text is not JSONC or something on the way is not an object."""
    b = blank(text)
    obj = _object_at(b, 0)
    for key in path:
        member = obj.get(key)
        if member is None:
            return None
        if not isinstance(member.value, dict):
            raise JsoncError(f'"{key}" is not an object')
        obj = _object_at(b, member.value_start)
    return obj


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _line_indent(text: str, pos: int) -> str | None:
    """The whitespace before ``pos`` on its line, or None when something else precedes it."""
    start = text.rfind("\n", 0, pos) + 1
    head = text[start:pos]
    return head if head.strip(" \t") == "" else None


def _member_indent(text: str, obj: Obj) -> tuple[str, str]:
    """(indent for a member, indent for the closing brace) matching the object's style."""
    for member in obj.members:
        found = _line_indent(text, member.key_start)
        if found is not None:
            return found, _line_indent(text, obj.close) or ""
    outer = _line_indent(text, obj.close)
    if outer is None:  # a one-line object: indent from its opening line
        start = text.rfind("\n", 0, obj.open) + 1
        line = text[start : obj.open]
        outer = line[: len(line) - len(line.lstrip(" \t"))]
    return outer + "  ", outer


def _render(value: Any, indent: str, newline: str) -> str:
    lines = json.dumps(value, indent=2, ensure_ascii=False).split("\n")
    return (newline + indent).join(lines)


def insert_first(text: str, obj: Obj, key: str, value: Any) -> str:
    """``text`` with ``"key": value`` as the first member of ``obj``."""
    newline = _newline(text)
    indent, close_indent = _member_indent(text, obj)
    member = f"{json.dumps(key)}: {_render(value, indent, newline)}"
    head = text[: obj.open + 1] + newline + indent + member
    if obj.members:
        return head + "," + text[obj.open + 1 :]
    inside = text[obj.open + 1 : obj.close]
    if inside.strip(_WS) == "":
        inside = newline + close_indent
    return head + inside + text[obj.close :]


def replace_value(text: str, obj: Obj, member: Member, value: Any) -> str:
    """``text`` with ``member``'s value replaced by ``value``."""
    indent, _ = _member_indent(text, obj)
    rendered = _render(value, indent, _newline(text))
    return text[: member.value_start] + rendered + text[member.value_end :]


def replace_raw(text: str, member: Member, raw: str) -> str:
    """``text`` with ``member``'s value replaced by ``raw`` JSONC text as is."""
    return text[: member.value_start] + raw + text[member.value_end :]


def remove(text: str, obj: Obj, member: Member) -> str:
    """``text`` without ``member`` (its line too when it stood on lines of its own)."""
    if member.comma is not None:
        start, end = member.key_start, member.comma + 1
        line_start = text.rfind("\n", 0, start) + 1
        rest_end = text.find("\n", end)
        rest_end = len(text) if rest_end == -1 else rest_end + 1
        own_line = _line_indent(text, start) is not None
        if own_line and text[end:rest_end].strip(_WS) == "":
            start, end = line_start, rest_end
        elif own_line and text[: max(line_start - 1, 0)].rstrip(" \t\r").endswith(("{", ",")):
            # it was put on a line of its own before the rest: join them again
            start = line_start - (2 if text[line_start - 2 : line_start] == "\r\n" else 1)
        else:
            while end < len(text) and text[end] in " \t":
                end += 1
        return text[:start] + text[end:]
    index = obj.members.index(member)
    if index > 0:
        previous = obj.members[index - 1]
        assert previous.comma is not None  # a member follows it
        return text[: previous.comma] + text[member.value_end :]
    inside = text[member.value_end : obj.close]
    if inside.strip(_WS) == "":
        inside = ""
    return text[: obj.open + 1] + inside + text[obj.close :]

"""Control characters in untrusted text: shown visibly when printed, refused in input.

A release reason, a report's feedback or a model's name is written by whoever sent it.
Printed raw, ``ESC ]0;…BEL`` retitles a person's terminal, ``ESC [2J`` clears it, a C1
``CSI`` (``\\x9b``) does the same on terminals that read 8-bit controls, and a bidi
override makes a line read as something it is not. ``visible`` spells each such
character out (``\\x1b``, ``\\u202e``) so the text is still all there, just harmless;
``check_text`` refuses them where a person types a reason or a description.
"""

from __future__ import annotations

from reef_cli.core.errors import InvalidText

MAX_REASON = 2000  # the API's cap on a reason or a description (server/api.py)

# Bidi marks, embeddings, overrides and isolates: Unicode's "Trojan Source" set.
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
CONTROLS = frozenset([*range(0x20), 0x7F, *range(0x80, 0xA0), *map(ord, BIDI)])
_LINES = frozenset({ord("\n"), ord("\t")})


def _spelled(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_ONE_LINE = {code: _spelled(code) for code in CONTROLS}
_MULTI_LINE = {code: spelled for code, spelled in _ONE_LINE.items() if code not in _LINES}
# In JSON text: C0 is escaped by json itself; DEL, C1 and bidi become \\uXXXX escapes
# (they only ever occur inside strings, so the JSON means the same).
_JSON = {code: f"\\u{code:04x}" for code in CONTROLS if code >= 0x7F}


def visible(text: str, *, multiline: bool = True) -> str:
    """``text`` with every control character spelled out; ``multiline`` keeps ``\\n`` and
    ``\\t`` (text meant to span lines), otherwise they are spelled out too."""
    return text.translate(_MULTI_LINE if multiline else _ONE_LINE)


def json_visible(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) made safe for a terminal."""
    return text.translate(_JSON)


def first_control(text: str, *, multiline: bool = True) -> int | None:
    """The index of the first control character (``\\n``/``\\t`` allowed when multiline)."""
    for index, char in enumerate(text):
        code = ord(char)
        if code in CONTROLS and not (multiline and code in _LINES):
            return index
    return None


def check_text(
    field: str, text: str, *, multiline: bool = True, limit: int | None = MAX_REASON
) -> str:
    """Return ``text`` if it holds no control character and fits ``limit``, else raise
    ``InvalidText`` naming ``field``."""
    if limit is not None and len(text) > limit:
        raise InvalidText(
            f"{field} is {len(text):,} characters; at most {limit:,} are allowed",
            f"shorten {field}",
            field=field,
        )
    index = first_control(text, multiline=multiline)
    if index is not None:
        allowed = " (line breaks and tabs are fine)" if multiline else ""
        raise InvalidText(
            f"{field} holds a control character ({_spelled(ord(text[index]))} at "
            f"position {index}){allowed}",
            f"remove control characters from {field}",
            field=field,
        )
    return text

"""Server-sent events: encode one event, split a byte stream at event boundaries, parse."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from reef_cli.core.compact_json import ascii_compact


def encode(data: Any, event: str | None = None) -> bytes:
    """One SSE event; ``data`` is JSON-encoded unless it is already ``str``."""
    text = data if isinstance(data, str) else ascii_compact(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def _boundary(buf: bytes | bytearray) -> int:
    """Index just past the last complete event in ``buf`` (0 if none)."""
    best = 0
    for sep in (b"\n\n", b"\r\n\r\n", b"\r\r"):
        i = buf.rfind(sep)
        if i >= 0:
            best = max(best, i + len(sep))
    return best


class Splitter:
    """Feed raw chunks; get back the bytes that form complete events (partial ones wait)."""

    def __init__(self) -> None:
        self._pending = bytearray()

    def feed(self, chunk: bytes) -> bytes:
        if not self._pending:
            cut = _boundary(chunk)
            if cut == len(chunk):
                return chunk  # the common case: whole events, no copy
            self._pending += chunk[cut:]
            return chunk[:cut]
        self._pending += chunk
        cut = _boundary(self._pending)
        out = bytes(self._pending[:cut])
        del self._pending[:cut]
        return out

    def rest(self) -> bytes:
        out = bytes(self._pending)
        self._pending.clear()
        return out


def iter_events(raw: bytes | str) -> Iterator[tuple[str | None, str]]:
    """Parse a whole SSE text into ``(event, data)`` pairs (comments and ids ignored)."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    for block in text.split("\n\n"):
        event: str | None = None
        data: list[str] = []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
        if data or event:
            yield event, "\n".join(data)


class Parser:
    """Incremental SSE parser: feed chunks, get ``(event, data)`` pairs as events complete."""

    def __init__(self) -> None:
        self._split = Splitter()

    def feed(self, chunk: bytes) -> list[tuple[str | None, str]]:
        whole = self._split.feed(chunk)
        return list(iter_events(whole)) if whole else []

    def close(self) -> list[tuple[str | None, str]]:
        rest = self._split.rest()
        return list(iter_events(rest)) if rest.strip() else []


_SEQUENCE = re.compile(rb'"sequence_number"\s*:\s*(\d+)')


def last_sequence(raw: bytes) -> int | None:
    """The last ``sequence_number`` in ``raw`` (Responses API events), if any."""
    at = raw.rfind(b'"sequence_number"')
    found = _SEQUENCE.match(raw, at) if at >= 0 else None
    return int(found.group(1)) if found is not None else None


def numbered(raw: bytes, start: int) -> bytes:
    """``raw``'s events with ``sequence_number`` start, start+1, …: the events Reef adds
    to a Responses stream (the receipt, an error) continue the upstream's numbering."""
    out = []
    for i, (event, data) in enumerate(iter_events(raw)):
        try:
            parsed = json.loads(data)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            parsed["sequence_number"] = start + i
            out.append(encode(parsed, event))
        else:
            out.append(encode(data, event))
    return b"".join(out)

"""``x-reef-tag-<name>: <value>`` request headers: labels a client puts on an exchange
(a team, a ticket, an experiment), kept with its record and filterable
(`reef records list --tag`, ``Store.iter(tags=…)``). A bad tag refuses the request with
a 400 naming it, before anything is recorded."""

from __future__ import annotations

import re

from reef_cli.core.errors import OptionInvalid

PREFIX = b"x-reef-tag-"
MAX_TAGS = 16
MAX_VALUE = 256
NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}\Z")
_VALUE = re.compile(r"[\x20-\x7e]*\Z")  # printable ASCII: a header value, shown on terminals


class TagInvalid(OptionInvalid):
    """A tag Reef will not keep (a header: 400; `--tag`: exit 2); the message names it
    and the rule."""


def tags_of(headers: list[tuple[bytes, bytes]]) -> dict[str, str] | None:
    """The tags among a request's raw (ASGI: lower-cased) headers; None when it sent none.
    A name repeated keeps its last value."""
    found: dict[str, str] | None = None
    for key, raw in headers:
        if not key.startswith(PREFIX):
            continue
        name = key[len(PREFIX) :].decode("latin-1")
        value = raw.decode("latin-1").strip()
        if not NAME.match(name):
            raise TagInvalid(
                f"x-reef-tag-{name[:64]}: a tag name is 1-64 of a-z, 0-9, '_', '.', '-'"
            )
        if len(value) > MAX_VALUE or not _VALUE.match(value):
            raise TagInvalid(
                f"x-reef-tag-{name}: a tag value is at most {MAX_VALUE} printable ASCII characters"
            )
        found = found if found is not None else {}
        found[name] = value
        if len(found) > MAX_TAGS:
            raise TagInvalid(f"at most {MAX_TAGS} x-reef-tag-* headers")
    return found


def parse_filter(spec: str) -> tuple[str, str]:
    """``NAME=VALUE`` (a `--tag` option) -> (name, value), checked like a header."""
    name, sep, value = spec.partition("=")
    name = name.strip().lower()
    if not sep or not NAME.match(name):
        raise TagInvalid(f"--tag {spec!r}: use NAME=VALUE, NAME of a-z, 0-9, '_', '.', '-'")
    return name, value.strip()

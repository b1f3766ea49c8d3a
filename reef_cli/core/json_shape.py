"""A dataclass's JSON shape read from its fields, for the ``to_json`` methods that would
otherwise list every field by hand (and miss the next one added).

Keys come in field order and values as they are (not copied or converted), as a
hand-written ``{"name": self.name, ...}`` would give them. A ``to_json`` that renames,
rounds, nests or hides something still writes its dict by hand.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

EMPTY: tuple[Any, ...] = (None, "", [], {})


def field_dict(
    obj: DataclassInstance, *, leave_out: tuple[str, ...] = (), drop_empty: bool = False
) -> dict[str, Any]:
    """``obj``'s fields but those in ``leave_out``; with ``drop_empty``, also the optional
    ones (those with a default) whose value is empty: None, "", [] or {}."""
    out: dict[str, Any] = {}
    for f in fields(obj):
        value = getattr(obj, f.name)
        optional = f.default is not MISSING or f.default_factory is not MISSING
        if f.name in leave_out or (drop_empty and optional and value in EMPTY):
            continue
        out[f.name] = value
    return out

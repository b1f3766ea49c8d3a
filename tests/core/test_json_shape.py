"""field_dict: a dataclass's fields in order, less those left out or optional and empty."""

from __future__ import annotations

from dataclasses import dataclass, field

from reef_cli.core.json_shape import field_dict


@dataclass
class Row:
    name: str
    note: str = ""
    tags: list[str] = field(default_factory=list)
    size: int = 0
    secret: str | None = None


def test_every_field_in_order_and_as_it_is() -> None:
    row = Row("a", tags=["t"])
    out = field_dict(row)
    assert list(out.items()) == [
        ("name", "a"),
        ("note", ""),
        ("tags", ["t"]),
        ("size", 0),
        ("secret", None),
    ]
    assert out["tags"] is row.tags


def test_left_out_fields_and_empty_optional_ones_are_dropped() -> None:
    assert field_dict(Row("a", secret="s"), leave_out=("secret", "tags")) == {
        "name": "a",
        "note": "",
        "size": 0,
    }
    # a required field stays even when empty; so does a zero
    assert field_dict(Row(""), drop_empty=True) == {"name": "", "size": 0}

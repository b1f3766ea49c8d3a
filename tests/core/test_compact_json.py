"""The encoders made once give json.dumps's own text, so nothing stored or sent changes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reef_cli.core.compact_json import ascii_compact, unicode_compact

VALUES: list[Any] = [
    {"k": "X", "id": "rec_1", "started": 12.5, "stream": False, "tags": None, "n": [70, 300]},
    {"content": 'café ☕ \u2028 "quoted" \\ back', "nested": [{"a": [1, 2.0, None]}]},
    ["é", 1e300, -0.0, True],
    "plain",
]


@pytest.mark.parametrize("value", VALUES)
def test_the_text_is_json_dumps_own(value: Any) -> None:
    assert ascii_compact(value) == json.dumps(value, separators=(",", ":"))
    assert unicode_compact(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)

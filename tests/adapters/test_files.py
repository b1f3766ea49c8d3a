"""Shared-file helpers of the adapters: uninstall never fails on a file the person broke."""

from __future__ import annotations

import pytest

from adapters._files import person_json_object
from adapters.claude_code import settings_json
from adapters.pi import models_json


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '"text"', ""])
def test_a_broken_or_non_object_file_is_left_alone(text: str) -> None:
    assert person_json_object(text) is None
    assert settings_json.unmerged(text) == text
    assert models_json.unmerged(text) == text


def test_an_object_is_read() -> None:
    assert person_json_object('{"a": 1}') == {"a": 1}

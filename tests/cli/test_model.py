"""`reef model list / use`: the registry as a listing, and the choice as a setting."""

from __future__ import annotations

import pytest

from reef_cli.core import embedded
from reef_cli.core.config import load_settings
from tests.cli.helpers import reef, reef_fails, reef_json


def test_list_shows_every_model_with_its_state_and_provenance() -> None:
    rows = {row["name"]: row for row in reef_json("model", "list")}
    assert list(rows) == ["smollm2-135m", "qwen2.5-coder-1.5b"]
    qwen = rows["qwen2.5-coder-1.5b"]
    assert qwen["size"] == 1_117_320_768 and len(qwen["wheels"]) == 22
    assert qwen["license"] == "Apache-2.0" and "sha256" in qwen["provenance"]
    assert rows["smollm2-135m"]["wanted"]  # tests run on the lite model
    assert not qwen["in_use"]
    text = reef("model", "list")
    assert "smollm2-135m" in text and "qwen2.5-coder-1.5b" in text and "in use" in text


def test_use_sets_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REEF_EMBEDDED_MODEL")
    out = reef("model", "use", "qwen2.5-coder-1.5b")
    assert "embedded model: qwen2.5-coder-1.5b" in out
    assert load_settings().embedded_model == "qwen2.5-coder-1.5b"
    assert embedded.resolve().wanted == "qwen2.5-coder-1.5b"
    shown = reef_json("config", "show")["settings"]
    assert [r["source"] for r in shown if r["key"] == "embedded_model"] == ["file"]


def test_use_refuses_an_unknown_model_in_one_line() -> None:
    line = reef_fails("model", "use", "gpt-99")
    assert "unknown embedded model 'gpt-99'" in line and "smollm2-135m" in line
    assert load_settings().embedded_model == "smollm2-135m"  # unchanged (the tests' env)


def test_install_refuses_an_unknown_model_in_one_line() -> None:
    line = reef_fails("model", "install", "gpt-99")
    assert "unknown embedded model 'gpt-99'" in line

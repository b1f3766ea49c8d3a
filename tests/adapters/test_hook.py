"""The hook frame both Claude Code's and Codex's hooks run (``adapters._hook``): it never
fails the person's session."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from adapters.claude_code import hook as claude_hook
from adapters.codex import hook as codex_hook
from tests.adapters.helpers import hook_output

MAINS = [
    pytest.param(claude_hook.main, id="claude-code"),
    pytest.param(codex_hook.main, id="codex"),
]


@pytest.mark.parametrize("main", MAINS)
def test_hook_stays_out_of_the_way_when_reef_is_gone(
    main: Callable[[list[str]], int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert hook_output(main, "session-start", tmp_path / "missing.json", {}, monkeypatch) is None
    config = tmp_path / "hook.json"
    config.write_text(
        json.dumps({"scenario": "gone", "target": str(tmp_path), "reef_home": str(tmp_path / "h")})
    )
    out = hook_output(main, "session-start", config, {}, monkeypatch)
    assert out is not None and out["systemMessage"].startswith("Reef: unknown scenario 'gone'")


@pytest.mark.parametrize("main", MAINS)
def test_a_broken_config_is_a_message_not_a_traceback(
    main: Callable[[list[str]], int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "hook.json"
    config.write_text(json.dumps({"reef_home": str(tmp_path / "h")}))  # no scenario, no target
    start = hook_output(main, "session-start", config, {}, monkeypatch)
    assert start is not None and start["systemMessage"].startswith("Reef: ")
    prompt = {"prompt": "$versions" if main is codex_hook.main else "/versions"}
    blocked = hook_output(main, "user-prompt-submit", config, prompt, monkeypatch)
    assert blocked is not None and blocked["decision"] == "block"
    assert "failed (KeyError" in blocked["reason"]

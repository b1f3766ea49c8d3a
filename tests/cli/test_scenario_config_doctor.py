from __future__ import annotations

from pathlib import Path

from tests.cli.helpers import reef, reef_json


def test_scenario_lifecycle() -> None:
    reef("scenario", "create", "alpha", "-d", "first one")
    assert reef_json("scenario", "list")[0]["name"] == "alpha"
    shown = reef_json("scenario", "show", "alpha")
    assert shown["releases"] == 0 and shown["description"] == "first one"
    out = reef("scenario", "delete", "alpha")
    assert "Archived" in out
    assert reef_json("scenario", "list") == []
    [archived] = reef_json("scenario", "list", "--archived")
    reef("scenario", "restore", archived)
    assert reef_json("scenario", "list")[0]["name"] == "alpha"


def test_config_show_set_unset(reef_home: Path) -> None:
    reef("config", "set", "serve_port", "9001")
    rows = {r["key"]: r for r in reef_json("config", "show")["settings"]}
    assert rows["serve_port"]["value"] == 9001 and rows["serve_port"]["source"] == "file"
    reef("config", "unset", "serve_port")
    rows = {r["key"]: r for r in reef_json("config", "show")["settings"]}
    assert rows["serve_port"]["value"] == 8901


def test_doctor_reports_every_check_with_fixes() -> None:
    rows = {r["name"]: r for r in reef_json("doctor")}
    for name in (
        "git",
        "git-lfs",
        "bwrap",
        "pasta",
        "node",
        "pi",
        "claude",
        "embedded model",
        "state dir",
        "package adapters",
        "package recipes",
        "package sandbox",
    ):
        assert name in rows, name
    assert rows["git"]["status"] == "ok"
    assert rows["state dir"]["status"] == "ok"
    assert rows["package sandbox"]["status"] == "ok"
    for row in rows.values():
        assert row["status"] == "ok" or row["fix"], row


def test_doctor_flags_an_unwritable_state_dir(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("REEF_HOME", str(blocker / "sub"))
    from typer.testing import CliRunner

    from reef_cli.cli.main import app

    result = CliRunner().invoke(app, ["doctor", "--json"])
    assert result.exit_code == 1
    assert '"fail"' in result.output and "REEF_HOME" in result.output

"""`reef serve --print-config` (issue 27, item 4): the settings it would serve with, as
YAML that ``-c`` reads back to the same settings, passwords masked, nothing served."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from reef_cli.server import serve_config
from tests.cli.helpers import reef, reef_fails


def test_it_prints_what_flags_file_and_defaults_make(tmp_path: Path) -> None:
    file = tmp_path / "serve.yaml"
    file.write_text(
        "port: 9100\nread_timeout: 30\nmetrics_open: true\n"
        "reef:\n  recipe: skillclaw\n  batch_size: 4\n"
    )
    out = reef("serve", "-c", str(file), "--port", "9200", "--scenario", "shop", "--print-config")
    shown = yaml.safe_load(out)
    assert shown["port"] == 9200  # the flag wins over the file
    assert shown["read_timeout"] == 30.0 and shown["metrics_open"] is True
    assert shown["default_scenario"] == "shop"
    assert shown["reef"]["recipe"] == "skillclaw" and shown["reef"]["batch_size"] == 4
    assert shown["max_body_bytes"] == 32 * 1024 * 1024  # a default, spelled out
    # what it printed is a serve file: read back, it builds the same settings
    again = tmp_path / "again.yaml"
    again.write_text(out)
    built = serve_config.build(serve_config.load_file(again))
    assert built.shown() == shown


def test_passwords_are_masked_and_the_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "serve.yaml"
    file.write_text(
        "database_url: postgresql://reef:file-secret@db.internal/reef\n"
        "upstream: https://user:up-secret@models.internal/v1\n"
    )
    out = reef("serve", "-c", str(file), "--print-config")
    assert "file-secret" not in out and "up-secret" not in out
    shown = yaml.safe_load(out)
    assert shown["database_url"] == "postgresql://reef:***@db.internal/reef"
    assert shown["upstream"] == "https://user:***@models.internal/v1"
    monkeypatch.setenv("REEF_DATABASE_URL", "postgresql://team:env-secret@pg.internal/reef")
    shown = yaml.safe_load(reef("serve", "-c", str(file), "--print-config"))
    assert shown["database_url"] == "postgresql://team:***@pg.internal/reef"


def test_a_bad_setting_is_one_line_and_nothing_is_printed(tmp_path: Path) -> None:
    file = tmp_path / "serve.yaml"
    file.write_text("metrics: maybe\n")
    line = reef_fails("serve", "-c", str(file), "--print-config")
    assert "metrics" in line

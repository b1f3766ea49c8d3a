from __future__ import annotations

from pathlib import Path

import pytest

from reef_cli.core import config
from reef_cli.core.errors import ConfigError


def test_defaults_file_and_env_precedence(reef_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert config.load_settings().serve_port == 8901
    config.set_setting("serve_port", "9000")
    assert config.load_settings().serve_port == 9000
    assert "serve_port = 9000" in (reef_home / "config.toml").read_text()
    monkeypatch.setenv("REEF_SERVE_PORT", "9100")
    assert config.load_settings().serve_port == 9100
    sources = {row["key"]: row["source"] for row in config.describe()}
    assert sources["serve_port"] == "env"
    assert sources["model"] == "default"


def test_set_rejects_a_wrong_type_and_keeps_the_file(reef_home: Path) -> None:
    config.set_setting("default_scenario", "team")
    before = (reef_home / "config.toml").read_bytes()
    with pytest.raises(ConfigError, match="serve_port"):
        config.set_setting("serve_port", "eighty")
    with pytest.raises(ConfigError, match="unknown setting"):
        config.set_setting("nope", "1")
    assert (reef_home / "config.toml").read_bytes() == before


def test_wrong_type_in_file_names_key_and_file(reef_home: Path) -> None:
    reef_home.mkdir()
    (reef_home / "config.toml").write_text('serve_port = "high"\n')
    with pytest.raises(ConfigError) as info:
        config.load_settings()
    assert "serve_port" in info.value.message
    assert "config.toml" in info.value.message


def test_bad_toml_and_unknown_keys_in_file(reef_home: Path) -> None:
    reef_home.mkdir()
    path = reef_home / "config.toml"
    path.write_text("serve_port = = 1\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        config.load_settings()
    path.write_text("colour = 'blue'\n")
    with pytest.raises(ConfigError, match="unknown setting 'colour'"):
        config.load_settings()


def test_wrong_type_in_env_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REEF_PUBLISH_RETRIES", "-3")
    with pytest.raises(ConfigError, match=r"\$REEF_PUBLISH_RETRIES"):
        config.load_settings()


def test_unset_returns_to_default() -> None:
    config.set_setting("serve_host", "0.0.0.0")
    config.unset_setting("serve_host")
    assert config.load_settings().serve_host == "127.0.0.1"

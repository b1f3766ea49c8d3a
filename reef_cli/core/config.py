"""Reef's settings: a pydantic model read from ``config.toml`` in the state dir and ``REEF_*``.

Precedence, lowest to highest: defaults, ``config.toml``, environment variables. A wrong
type in either source is a ``ConfigError`` that names the key and where it came from.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from reef_cli.core import model_registry, paths
from reef_cli.core.budget import BudgetLimits
from reef_cli.core.errors import ConfigError
from reef_cli.core.fsutil import atomic_write_text


class Settings(BaseModel):
    """Everything a user may set. Each field maps to env var ``REEF_<FIELD>`` (upper case)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    default_scenario: str = Field("default", description="scenario used when --scenario is omitted")
    model: str | None = Field(
        None, description="LiteLLM model string for recipes; unset means the embedded model"
    )
    api_base: str | None = Field(None, description="base URL for `model`, when it needs one")
    embedded_model: str | None = Field(
        None,
        description="embedded model (`reef model list`); unset: qwen2.5-coder-1.5b with "
        ">= 6 GiB of memory, else smollm2-135m",
    )
    embedded_slots: int = Field(
        1,
        ge=1,
        le=16,
        description="requests the embedded model decodes together: more serve several "
        "clients faster, but an answer then depends on what is decoded beside it",
    )
    serve_host: str = Field("127.0.0.1", description="address `reef serve` binds")
    serve_port: int = Field(8901, ge=1, le=65535, description="port `reef serve` binds")
    upstream: str | None = Field(None, description="upstream base URL for `reef serve`")
    max_file_kib: int = Field(256, ge=1, le=65536, description="largest file in a harness tree")
    max_tree_kib: int = Field(2048, ge=1, le=1048576, description="largest harness tree in total")
    max_calls: int | None = Field(
        None, ge=1, description="model-call budget per evolve job (unset: the recipe's default)"
    )
    max_tokens: int | None = Field(
        None, ge=1, description="token budget per evolve job (unset: the recipe's default)"
    )
    max_seconds: float | None = Field(
        None, gt=0, description="wall-time budget per evolve job (unset: the recipe's default)"
    )
    judge_model: str | None = Field(
        None,
        description="LiteLLM model string that judges drafts and trial answers "
        "(unset: the job's own model)",
    )
    judge_api_base: str | None = Field(None, description="base URL for `judge_model`")
    judge_threshold: float = Field(
        0.6, ge=0, le=1, description="judge score (0..1) a draft and an answer must reach"
    )
    publish_retries: int = Field(
        20, ge=0, le=1000, description="times a publish retries after losing a race"
    )
    database_url: str | None = Field(
        None,
        description="where records live: postgresql://USER:PASSWORD@HOST:5432/DB for a team "
        "(default: the SQLite file in the state dir)",
    )
    records_max_gb: float | None = Field(
        None, gt=0, description="records budget: the oldest unreferenced ones go beyond it"
    )
    records_max_age_days: float | None = Field(
        None, gt=0, description="records older than this are evicted (unless referenced)"
    )

    @field_validator("embedded_model")
    @classmethod
    def _known_model(cls, value: str | None) -> str | None:
        if value is not None and value not in model_registry.REGISTRY:
            names = ", ".join(model_registry.REGISTRY)
            raise ValueError(f"unknown embedded model; one of: {names}")
        return value


FIELDS = tuple(Settings.model_fields)


def configured_limits(settings: Settings) -> BudgetLimits:
    """The budget a person configured (``reef config set max_calls 40``); unset is None."""
    return BudgetLimits(settings.max_calls, settings.max_tokens, settings.max_seconds)


def env_name(field: str) -> str:
    return f"REEF_{field.upper()}"


def _read_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    fix = f"edit {path} or delete it to use defaults"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}", fix) from None
    except RecursionError:
        raise ConfigError(f"{path} is nested too deeply to be settings", fix) from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", fix) from None
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ConfigError(
            f"{path}: unknown setting {unknown[0]!r}",
            f"remove it; known settings: {', '.join(FIELDS)}",
        )
    return data


def _read_env() -> dict[str, Any]:
    found = {f: os.environ[env_name(f)] for f in FIELDS if env_name(f) in os.environ}
    for field, value in found.items():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # bytes the locale could not decode: no usable setting
            raise ConfigError(
                f"${env_name(field)} is not UTF-8 text",
                f"export {env_name(field)}=VALUE with a valid value, or unset it",
            ) from None
    return found


def _shown(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters: a pasted blob stays one short line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _validate(data: dict[str, Any], source: dict[str, str]) -> Settings:
    try:
        return Settings(**data)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err["loc"] else "?"
        where = source.get(key, "config")
        raise ConfigError(
            f"setting {key!r} from {where}: {err['msg']} (got {_shown(err.get('input'))})",
            f"run `reef config set {key} VALUE` with a valid value, or fix {where}",
        ) from exc


def load_settings() -> Settings:
    """Defaults < config.toml < REEF_* environment variables."""
    path = paths.config_path()
    file_data = _read_file(path)
    env_data = _read_env()
    source = {k: str(path) for k in file_data} | {k: f"${env_name(k)}" for k in env_data}
    return _validate(file_data | env_data, source)


def set_setting(key: str, value: str) -> Settings:
    """Validate ``key = value`` and write it to config.toml atomically."""
    import tomli_w

    if key not in FIELDS:
        raise ConfigError(f"unknown setting {key!r}", f"known settings: {', '.join(FIELDS)}")
    path = paths.config_path()
    data = _read_file(path)
    data[key] = value
    checked = _validate(data, {key: "the command line"})
    stored = {k: getattr(checked, k) for k in data if getattr(checked, k) is not None}
    paths.ensure_state_dir()
    atomic_write_text(path, tomli_w.dumps(stored))
    return checked


def unset_setting(key: str) -> None:
    import tomli_w

    if key not in FIELDS:
        raise ConfigError(f"unknown setting {key!r}", f"known settings: {', '.join(FIELDS)}")
    path = paths.config_path()
    data = _read_file(path)
    if data.pop(key, None) is not None:
        atomic_write_text(path, tomli_w.dumps(data))


def describe() -> list[dict[str, Any]]:
    """Each setting with its value and where the value came from (for `reef config show`)."""
    path = paths.config_path()
    file_data = _read_file(path)
    env_data = _read_env()
    settings = load_settings()
    rows = []
    for name, field in Settings.model_fields.items():
        origin = "env" if name in env_data else "file" if name in file_data else "default"
        value = getattr(settings, name)
        if name == "database_url" and value:
            from reef_cli.core.store_url import shown_url

            value = shown_url(value)  # never print the password
        rows.append(
            {
                "key": name,
                "value": value,
                "source": origin,
                "env": env_name(name),
                "description": field.description or "",
            }
        )
    return rows

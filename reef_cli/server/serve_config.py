"""`reef serve` settings: command-line flags, a YAML file (``-c serve.yaml``) and defaults."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from reef_cli.core import agents, plugins, yaml_config
from reef_cli.core.errors import ReefError, ServeError
from reef_cli.core.names import is_kebab

Dialect = Literal["openai", "anthropic"]


class LearningConfig(BaseModel):
    """The live loop (`reef:` in serve.yaml, or `--recipe NAME`): which recipe runs in the
    background once a scenario has ``batch_size`` eligible scored sessions."""

    model_config = ConfigDict(extra="forbid")

    recipe: str = Field(
        description="a recipe that needs no ask (`reef evolve --help` lists them): skillclaw, "
        "gepa (it needs the scenario's tasks.yaml), or one a plugin registers"
    )
    batch_size: int = Field(8, ge=1, le=10**9, description="eligible sessions before a run")
    max_staleness: int | None = Field(
        2,
        ge=0,
        description="sessions recorded under a release more than N older than the served "
        "one are not eligible (counted as stale); null: no limit",
    )
    min_interval_s: float = Field(
        600.0, ge=0, description="at most one run per this many seconds per scenario"
    )
    publish: Literal["auto", "review"] = Field(
        "auto", description="auto: a passing candidate goes live; review: it waits as pending"
    )
    scenarios: list[str] | None = Field(
        None, description="which scenarios learn (default: every scenario with traffic)"
    )
    poll_s: float = Field(
        2.0, gt=0, le=3600, description="how often eligibility is recomputed (off the hot path)"
    )
    adapter: str | None = Field(None, description="agent for a recipe's trials (default: pi)")
    options: dict[str, int | float | str | bool] = Field(
        default_factory=dict, description="the recipe's options (gepa: max_metric_calls, seed)"
    )

    @field_validator("recipe")
    @classmethod
    def _known_recipe(cls, value: str) -> str:
        name = value.strip().lower()
        unattended = plugins.unattended_text()
        if name not in plugins.recipe_names():
            raise ValueError(f"unknown recipe {value!r}: use {unattended}")
        if plugins.recipe(name).needs_ask:
            raise ValueError(
                f"{name} learns from an ask, not from traffic: use {unattended} here "
                "(asks go to `reef evolve ASK` or POST /reef/evolve)"
            )
        return name

    @field_validator("adapter")
    @classmethod
    def _known_adapter(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return agents.get(value).name
        except ReefError as exc:
            raise ValueError(exc.one_line()) from None

    @field_validator("scenarios")
    @classmethod
    def _kebab(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        for name in value:
            if not is_kebab(name):
                raise ValueError(f"{name!r} is not a kebab-case scenario name")
        return list(dict.fromkeys(value))


class ServeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(8901, ge=0, le=65535)
    upstream: str | None = Field(
        None, description="upstream base URL, e.g. http://127.0.0.1:11434/v1"
    )
    upstream_model: str | None = Field(
        None, description="model name sent upstream (overrides clients')"
    )
    upstream_dialect: Dialect | None = Field(
        None, description="openai | anthropic (guessed from the URL)"
    )
    upstream_key_env: str | None = Field(None, description="env var holding the upstream API key")
    upstream_responses: bool | None = Field(
        None,
        description="the upstream speaks the OpenAI Responses API: /v1/responses is relayed "
        "as bytes (default: only for api.openai.com); else it is translated to chat",
    )
    default_scenario: str = "default"
    allow_implicit_scenario_creation: bool = Field(
        True,
        description="a request naming an unknown scenario (x-reef-scenario) creates it; "
        "off: it is a 404. Never for scenario tokens, which may only use existing scenarios",
    )
    max_body_bytes: int = Field(32 * 1024 * 1024, ge=1024)
    max_answer_bytes: int = Field(
        32 * 1024 * 1024,
        ge=1024,
        description="largest upstream answer (body or stream) relayed; a larger one is cut "
        "off with a 502 (--max-answer-mb)",
    )
    max_record_backlog_bytes: int = Field(
        256 * 1024 * 1024,
        ge=1024,
        description="bytes of exchanges that may wait for the records store; past it new "
        "inference requests get a 503 with Retry-After until the store catches up "
        "(--max-record-backlog-mb)",
    )
    connect_timeout: float = Field(10.0, gt=0)
    read_timeout: float = Field(600.0, gt=0, description="seconds of upstream silence before a 504")
    body_timeout: float = Field(60.0, gt=0, description="seconds a client may take to send a body")
    release_cache_seconds: float = Field(
        2.0,
        ge=0,
        description="how often the served release is re-read in the background as a safety "
        "net (every request already sees a publish at once: it checks the chain ref)",
    )
    record: bool = True
    record_writer: Literal["process", "thread"] = Field(
        "process",
        description="who turns the receipt journal into records: a writer process (no "
        "record building on the serving process's GIL) or a thread inside it",
    )
    open: bool = Field(False, description="no token required (loopback binds only)")
    access_log: bool = False
    pool_size: int = Field(256, ge=1)
    database_url: str | None = Field(
        None,
        description="where records live (postgresql://…); $REEF_DATABASE_URL wins over it, "
        "and with neither the SQLite file in the state dir is used",
    )
    remote_poll_seconds: float = Field(
        2.0,
        gt=0,
        description="how often scenarios with a chain remote pull it, so a publish on any "
        "replica is served here within this interval",
    )
    metrics: bool = Field(
        True,
        description="GET /metrics in Prometheus' text format (counts, latencies, store "
        "readings; never content); off: nothing is counted and the route is a 404",
    )
    metrics_open: bool = Field(
        False,
        description="GET /metrics without a token (loopback binds only); else it needs a "
        "token for every scenario, which Prometheus sends from its scrape config",
    )
    reef: LearningConfig | None = Field(
        None, description="the live loop (recipe, batch_size, max_staleness, min_interval_s …)"
    )

    @property
    def dialect(self) -> Dialect:
        if self.upstream_dialect:
            return self.upstream_dialect
        if self.upstream and "anthropic.com" in self.upstream:
            return "anthropic"
        return "openai"

    @property
    def relays_responses(self) -> bool:
        """Whether ``/v1/responses`` goes to the upstream as is (it keeps the state)."""
        if self.upstream_responses is not None:
            return self.upstream_responses and self.dialect == "openai"
        return self.dialect == "openai" and "api.openai.com" in (self.upstream or "")

    def upstream_base(self) -> str:
        """The upstream origin (+ path prefix) without a trailing ``/v1``."""
        if not self.upstream:
            raise ServeError(
                "no upstream configured",
                "pass --upstream URL (e.g. http://127.0.0.1:11434/v1), set it in the -c file, "
                "or `reef config set upstream URL`",
            )
        base = self.upstream.strip().rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise ServeError(
                f"upstream {self.upstream!r} is not an http(s) URL", "use e.g. http://host:port/v1"
            )
        return base[: -len("/v1")] if base.endswith("/v1") else base

    def upstream_key(self) -> str | None:
        if not self.upstream_key_env:
            return None
        value = os.environ.get(self.upstream_key_env)
        if not value:
            raise ServeError(
                f"${self.upstream_key_env} is not set (--upstream-key-env names it)",
                f"export {self.upstream_key_env}=<your upstream API key>",
            )
        return value.strip()

    def shown(self) -> dict[str, Any]:
        """Every setting as this server runs with it, safe to print (`reef serve
        --print-config`, ``GET /reef/status``): the database the store opens
        ($REEF_DATABASE_URL wins over ``database_url``; null: the SQLite file in the state
        dir), URLs with their password as ``***``. A key's value is never here:
        ``upstream_key_env`` names a variable."""
        from reef_cli.core.store import database_url
        from reef_cli.core.store_url import shown_url

        data = self.model_dump(mode="json")
        data["database_url"] = database_url(self.database_url)
        for key in ("database_url", "upstream"):
            if data[key]:
                data[key] = shown_url(data[key])
        return data

    def is_loopback(self) -> bool:
        if self.host in ("localhost", ""):
            return self.host == "localhost"
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def load_file(path: Path) -> dict[str, Any]:
    """Read a YAML (or JSON) serve file into a dict of ServeConfig fields (the shared
    loader, ``core/yaml_config.py``, says what is wrong with a bad file in one line)."""
    data = yaml_config.load_mapping(
        path,
        error=ServeError,
        fix="pass a readable YAML file of settings to -c (docs/api.md lists them)",
    )
    data = {k.replace("-", "_").replace(".", "_"): v for k, v in data.items()}
    aliases = {"inference_upstream_url": "upstream", "inference_upstream_model": "upstream_model"}
    data = {aliases.get(k, k): v for k, v in data.items()}
    data.pop("recipe", None)
    section = data.get("reef")
    if isinstance(section, dict):
        data["reef"] = {str(k).replace("-", "_"): v for k, v in section.items()}
    elif "reef" in data and section is None:
        del data["reef"]  # `reef:` with nothing under it: no live loop
    return data


def with_recipe(values: dict[str, Any], recipe: str | None) -> dict[str, Any]:
    """``--recipe NAME``: the live loop with NAME (the -c file's other `reef:` keys kept,
    else the defaults). A recipe that needs an ask (reefine) is accepted and starts no loop
    (asks reach it through POST /reef/evolve), so old command lines still start."""
    if recipe is None:
        return values
    name = recipe.strip().lower()
    if name in plugins.recipe_names() and plugins.recipe(name).needs_ask:
        return values
    section = values.get("reef")
    merged = dict(section) if isinstance(section, dict) else {}
    merged["recipe"] = recipe
    return {**values, "reef": merged}


def build(values: dict[str, Any]) -> ServeConfig:
    return yaml_config.validate(
        ServeConfig,
        {k: v for k, v in values.items() if v is not None},
        error=ServeError,
        what="serve setting",
        fix="fix the flag or the -c file",
    )

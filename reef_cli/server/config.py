"""`reef serve` settings: command-line flags, a YAML file (``-c serve.yaml``) and defaults."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reef_cli.core.errors import ServeError

Dialect = Literal["openai", "anthropic"]


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
    default_scenario: str = "default"
    max_body_bytes: int = Field(32 * 1024 * 1024, ge=1024)
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
    open: bool = Field(False, description="no token required (loopback binds only)")
    access_log: bool = False
    pool_size: int = Field(256, ge=1)

    @property
    def dialect(self) -> Dialect:
        if self.upstream_dialect:
            return self.upstream_dialect
        if self.upstream and "anthropic.com" in self.upstream:
            return "anthropic"
        return "openai"

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

    def is_loopback(self) -> bool:
        if self.host in ("localhost", ""):
            return self.host == "localhost"
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def load_file(path: Path) -> dict[str, Any]:
    """Read a YAML (or JSON) serve file into a dict of ServeConfig fields."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ServeError(f"cannot read {path}: {exc}", "pass a readable YAML file to -c") from exc
    if not isinstance(data, dict):
        raise ServeError(f"{path} must hold a mapping of settings", "see docs/api.md")
    data = {str(k).replace("-", "_").replace(".", "_"): v for k, v in data.items()}
    aliases = {"inference_upstream_url": "upstream", "inference_upstream_model": "upstream_model"}
    data = {aliases.get(k, k): v for k, v in data.items()}
    data.pop("recipe", None)
    return data


def build(values: dict[str, Any]) -> ServeConfig:
    try:
        return ServeConfig(**{k: v for k, v in values.items() if v is not None})
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "?"
        raise ServeError(
            f"serve setting {key!r}: {err['msg']}", "fix the flag or the -c file"
        ) from exc

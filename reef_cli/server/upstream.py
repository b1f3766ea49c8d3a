"""The upstream: where requests go, in which dialect, with which key and headers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from reef_cli.server.serve_config import ServeConfig

ANTHROPIC_VERSION = "2023-06-01"


@dataclass(frozen=True)
class Upstream:
    base: str
    dialect: str
    model: str | None
    key: str | None
    responses: bool = False  # it speaks the Responses API too (relay /v1/responses as is)

    @classmethod
    def from_config(cls, config: ServeConfig) -> Upstream:
        return cls(
            config.upstream_base(),
            config.dialect,
            config.upstream_model,
            config.upstream_key(),
            config.relays_responses,
        )

    @property
    def inference_path(self) -> str:
        return "/v1/messages" if self.dialect == "anthropic" else "/v1/chat/completions"

    def speaks(self, dialect: str) -> bool:
        """Whether a client's ``dialect`` goes to this upstream as is (else: translated).
        Embeddings go as is to an OpenAI-dialect upstream; there is nothing to translate
        them to (the proxy refuses them for an Anthropic one)."""
        return (
            dialect == self.dialect
            or (dialect == "responses" and self.responses)
            or (dialect == "embeddings" and self.dialect == "openai")
        )

    def path_for(self, dialect: str) -> str:
        """Where a request of the client's ``dialect`` goes."""
        if dialect == "embeddings":
            return "/v1/embeddings"
        return "/v1/responses" if dialect == "responses" and self.responses else self.inference_path

    def dialect_for(self, dialect: str) -> str:
        """The dialect the upstream answers a request of the client's ``dialect`` in."""
        if dialect in ("responses", "embeddings") and self.speaks(dialect):
            return dialect
        return self.dialect

    def url(self, path: str, query: str = "") -> str:
        return self.base + path + (f"?{query}" if query else "")

    def headers(self, client: Mapping[str, str] | None = None) -> dict[str, str]:
        """Headers for an upstream call; the client's own credentials never travel on."""
        out = {"content-type": "application/json", "accept-encoding": "identity"}
        if self.dialect == "anthropic":
            version = client.get("anthropic-version") if client else None
            out["anthropic-version"] = version or ANTHROPIC_VERSION
            beta = client.get("anthropic-beta") if client else None
            if beta:
                out["anthropic-beta"] = beta
            if self.key:
                out["x-api-key"] = self.key
        elif self.key:
            out["authorization"] = f"Bearer {self.key}"
        return out

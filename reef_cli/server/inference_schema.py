"""The inference routes (``/v1/...``) in the OpenAPI document, so clients and schemathesis
see their bodies.

The POST routes are served by the proxy's fast path (app.ReefApp), not FastAPI; the routes
here describe the requests (the fields Reef reads; the providers' others pass through) and
hand anything that reaches them to the proxy all the same.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import Response


class ResponsesRequest(BaseModel):
    """The fields Reef reads of an OpenAI Responses request (others are passed on)."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(..., description="the model id the client asks for")
    input: str | list[dict[str, Any]] = Field(
        ..., description="a user message, or items: message, function_call, function_call_output"
    )
    instructions: str | None = Field(None, description="the system prompt of this turn")
    tools: list[dict[str, Any]] | None = None
    tool_choice: Literal["auto", "none", "required"] | dict[str, Any] | None = None
    previous_response_id: str | None = Field(
        None, description="continue a stored response (Reef keeps it when the upstream cannot)"
    )
    store: bool | None = Field(None, description="false: this response cannot be continued")
    stream: bool | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None


class ChatRequest(BaseModel):
    """The fields Reef reads of an OpenAI Chat Completions request (others are passed on)."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(..., description="the model id (replaced by --upstream-model if set)")
    messages: list[dict[str, Any]] = Field(
        ..., description="system, user, assistant and tool messages"
    )
    stream: bool | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    tools: list[dict[str, Any]] | None = None


class MessagesRequest(BaseModel):
    """The fields Reef reads of an Anthropic Messages request (others are passed on)."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(..., description="the model id (replaced by --upstream-model if set)")
    messages: list[dict[str, Any]] = Field(..., description="user and assistant turns")
    max_tokens: int = Field(..., description="the most tokens to write")
    system: str | list[dict[str, Any]] | None = None
    stream: bool | None = None
    tools: list[dict[str, Any]] | None = None
    metadata: dict[str, Any] | None = Field(None, description="user_id may carry the session")


class EmbeddingsRequest(BaseModel):
    """OpenAI's embeddings request (other fields are relayed as sent)."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(..., description="the embedding model (never replaced)")
    input: str | list[Any] = Field(..., description="the text(s) or token arrays to embed")


class CountTokensRequest(BaseModel):
    """An Anthropic token-count request: a Messages request without ``max_tokens``."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[dict[str, Any]]
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None


_ANSWER = {
    "description": "the upstream's answer in the caller's dialect (JSON, or an SSE stream "
    "when the request asked for one), with x-reef-agent-record-id and x-reef-release-id",
    "content": {
        "application/json": {"schema": {"type": "object"}},
        "text/event-stream": {"schema": {"type": "string"}},
    },
}
_ROUTES: tuple[tuple[str, str, str, type[BaseModel] | None, str], ...] = (
    (
        "/v1/chat/completions",
        "POST",
        "chat_completions",
        ChatRequest,
        "OpenAI Chat Completions (recorded; translated for an Anthropic upstream)",
    ),
    (
        "/v1/messages",
        "POST",
        "messages",
        MessagesRequest,
        "Anthropic Messages (recorded; translated for an OpenAI upstream)",
    ),
    (
        "/v1/responses",
        "POST",
        "responses",
        ResponsesRequest,
        "OpenAI Responses API (recorded; translated to chat for chat-only upstreams)",
    ),
    (
        "/v1/embeddings",
        "POST",
        "embeddings",
        EmbeddingsRequest,
        "OpenAI embeddings (recorded; an OpenAI-dialect upstream only)",
    ),
    (
        "/v1/messages/count_tokens",
        "POST",
        "count_tokens",
        CountTokensRequest,
        "Anthropic token count (relayed; estimated for an OpenAI upstream)",
    ),
    (
        "/v1/models",
        "GET",
        "models",
        None,
        "the upstream's models, in the caller's dialect (anthropic-version: Anthropic's)",
    ),
)


def _route(endpoint: Any) -> Any:
    async def route(request: Request) -> Response:
        response: Response = await endpoint(request)
        return response

    return route


def install(app: FastAPI, proxy: Any) -> None:
    """Add the inference routes, each calling ``proxy``'s method of the same name."""
    for path, method, name, body, summary in _ROUTES:
        extra: dict[str, Any] = {}
        if body is not None:
            schema = body.model_json_schema()
            extra["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": schema}},
            }
        app.add_api_route(
            path,
            _route(getattr(proxy, name)),
            methods=[method],
            tags=["inference"],
            summary=summary,
            responses={200: _ANSWER},
            openapi_extra=extra or None,
        )

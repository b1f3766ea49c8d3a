"""``/v1/responses`` in the OpenAPI document, so clients and schemathesis see its body.

The inference routes are served by the proxy's fast path (app.ReefApp), not FastAPI; this
route only describes the request. The chat and messages routes stay undocumented: their
schemas are the providers' own, and the proxy passes their bodies through as they come.
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


def install(app: FastAPI, endpoint: Any) -> None:
    async def responses(request: Request) -> Response:
        response: Response = await endpoint(request)
        return response

    schema = ResponsesRequest.model_json_schema()
    app.add_api_route(
        "/v1/responses",
        responses,
        methods=["POST"],
        tags=["inference"],
        summary="OpenAI Responses API (recorded; translated to chat for chat-only upstreams)",
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": schema}},
            }
        },
    )

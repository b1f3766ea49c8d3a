"""Response translation (whole bodies, errors, model lists) between the two dialects."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from reef_cli.server.translate_request import anthropic_assistant_to_openai, parse_tool_arguments

O_TO_A_STOP = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}
A_TO_O_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "pause_turn": "stop",
    "refusal": "content_filter",
}
A_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "overloaded_error",
    504: "api_error",
    529: "overloaded_error",
}


def o_usage_to_a(usage: dict[str, Any] | None) -> dict[str, Any]:
    usage = usage or {}
    out = {
        "input_tokens": int(usage.get("prompt_tokens") or 0),
        "output_tokens": int(usage.get("completion_tokens") or 0),
    }
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    if cached:
        out["cache_read_input_tokens"] = int(cached)
        out["input_tokens"] = max(0, out["input_tokens"] - int(cached))
    return out


def a_usage_to_o(usage: dict[str, Any] | None) -> dict[str, Any]:
    usage = usage or {}
    cached = int(usage.get("cache_read_input_tokens") or 0)
    prompt = int(usage.get("input_tokens") or 0) + cached
    prompt += int(usage.get("cache_creation_input_tokens") or 0)
    completion = int(usage.get("output_tokens") or 0)
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


def openai_to_anthropic(resp: dict[str, Any], model: str | None = None) -> dict[str, Any]:
    """A ``chat.completion`` -> an Anthropic ``message``."""
    choice = (resp.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    text = msg.get("content")
    if isinstance(text, list):
        text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
    if text:
        content.append({"type": "text", "text": text})
    for call in msg.get("tool_calls") or []:
        fn = call.get("function") or {}
        content.append(
            {
                "type": "tool_use",
                "id": call.get("id") or f"toolu_{uuid.uuid4().hex[:24]}",
                "name": fn.get("name", ""),
                "input": parse_tool_arguments(fn.get("arguments")),
            }
        )
    finish = choice.get("finish_reason")
    stop = O_TO_A_STOP.get(finish or "stop", "end_turn")
    if msg.get("tool_calls") and stop == "end_turn":
        stop = "tool_use"
    return {
        "id": "msg_" + str(resp.get("id") or uuid.uuid4().hex).removeprefix("chatcmpl-"),
        "type": "message",
        "role": "assistant",
        "model": resp.get("model") or model or "",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": o_usage_to_a(resp.get("usage")),
    }


def anthropic_to_openai(resp: dict[str, Any], model: str | None = None) -> dict[str, Any]:
    """An Anthropic ``message`` -> a ``chat.completion``."""
    message = anthropic_assistant_to_openai(resp.get("content") or [], "")
    return {
        "id": "chatcmpl-" + str(resp.get("id") or uuid.uuid4().hex).removeprefix("msg_"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": resp.get("model") or model or "",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": A_TO_O_STOP.get(resp.get("stop_reason") or "end_turn", "stop"),
            }
        ],
        "usage": a_usage_to_o(resp.get("usage")),
    }


# ---------------------------------------------------------------- errors


def error_body(
    dialect: str,
    status: int,
    message: str,
    kind: str | None = None,
    *,
    param: str | None = None,
    code: str | None = None,
) -> dict[str, Any]:
    """A provider-shaped error body for ``dialect``; OpenAI's (chat and Responses) may
    name the ``param`` at fault and a ``code`` (default: the status)."""
    if dialect == "anthropic":
        return {
            "type": "error",
            "error": {"type": kind or A_ERROR_TYPES.get(status, "api_error"), "message": message},
        }
    return {
        "error": {
            "message": message,
            "type": kind or ("invalid_request_error" if status < 500 else "upstream_error"),
            "param": param,
            "code": status if code is None else code,
        }
    }


def error_message(body: Any) -> tuple[str, str | None]:
    """``(message, type)`` from an error body of either dialect (or anything else)."""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            return str(err.get("message") or json.dumps(err)[:500]), err.get("type")
        if isinstance(err, str):
            return err, None
        if "message" in body:
            return str(body["message"]), None
    text = body if isinstance(body, str) else json.dumps(body)[:500]
    return f"upstream error: {text[:500]}", None


def translate_error(to_dialect: str, status: int, body: Any) -> dict[str, Any]:
    message, kind = error_message(body)
    if to_dialect == "anthropic":
        kind = A_ERROR_TYPES.get(status, "api_error")
    return error_body(to_dialect, status, message, None if to_dialect == "anthropic" else kind)


# ---------------------------------------------------------------- models


def models_to_openai(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {"id": m.get("id"), "object": "model", "created": 0, "owned_by": "anthropic"}
            for m in body.get("data") or []
            if isinstance(m, dict)
        ],
    }


def models_to_anthropic(body: dict[str, Any]) -> dict[str, Any]:
    data = [
        {
            "type": "model",
            "id": m.get("id"),
            "display_name": m.get("id"),
            "created_at": "1970-01-01T00:00:00Z",
        }
        for m in body.get("data") or []
        if isinstance(m, dict)
    ]
    return {
        "data": data,
        "has_more": False,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
    }

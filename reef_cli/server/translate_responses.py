"""The OpenAI Responses API translated to and from Chat Completions (pure functions).

Codex CLI speaks only the Responses API; most upstreams (Ollama, vLLM, llama.cpp, the
embedded model, Anthropic through the chat translation) speak Chat Completions. This
module maps a Responses request (``instructions``, ``input`` items, tools, tool choice,
``text.format``) onto a chat request, and a chat answer back onto a ``response`` object.
The streamed direction is ``responses_stream.ChatToResponses``.

Item mapping, request side:

- ``instructions``                      -> a leading ``system`` message
- ``message`` (user/assistant/system/developer; text, image parts) -> a chat message
- ``function_call`` / ``custom_tool_call`` -> an assistant message's ``tool_calls``
  (consecutive calls merge into one assistant message)
- ``function_call_output`` / ``custom_tool_call_output`` -> a ``tool`` message
- ``reasoning`` and built-in tool calls (web search, …) -> dropped: a chat upstream
  has nothing to take them
- a ``custom`` tool (Codex's freeform ``apply_patch``) -> a function with one string
  parameter ``input``; a call to it comes back as a ``custom_tool_call`` item.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from reef_cli.server.translate_request import text_of

# The answer's ``status`` for a chat ``finish_reason`` that stopped early.
INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}
CUSTOM_INPUT = "input"  # the one parameter a custom (freeform) tool becomes


def new_id(prefix: str) -> str:
    """``msg_<32 hex>`` and the like (os.urandom: a fifth of uuid4's cost, per item)."""
    return f"{prefix}_{os.urandom(16).hex()}"


def custom_tool_names(body: dict[str, Any]) -> frozenset[str]:
    """Names of the request's ``custom`` (freeform) tools: their calls come back as
    ``custom_tool_call`` items, not ``function_call``."""
    return frozenset(
        str(tool.get("name"))
        for tool in body.get("tools") or []
        if isinstance(tool, dict) and tool.get("type") == "custom" and tool.get("name")
    )


def input_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's ``input`` as a list of items (a string is one user message)."""
    given = body.get("input")
    if isinstance(given, str):
        return [{"type": "message", "role": "user", "content": given}]
    if isinstance(given, list):
        return [item for item in given if isinstance(item, dict)]
    return []


# ---------------------------------------------------------------- request -> chat


def _content_to_chat(content: Any, role: str) -> Any:
    """Responses content (a string or parts) -> chat content: a string when it is all
    text (every chat server takes that), else parts with images."""
    if not isinstance(content, list):
        return text_of(content)
    images = [p for p in content if isinstance(p, dict) and p.get("type") == "input_image"]
    if not images or role != "user":
        return text_of(content)
    parts: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "input_image":
            url = part.get("image_url") or ""
            parts.append({"type": "image_url", "image_url": {"url": str(url)}})
        elif "text" in part:
            parts.append({"type": "text", "text": str(part.get("text", ""))})
    return parts


def _output_text(output: Any) -> str:
    """A tool's output (a string or content parts) as the text a tool message carries."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return text_of(output)
    return json.dumps(output)


def _call_of(item: dict[str, Any]) -> dict[str, Any]:
    """A ``function_call`` or ``custom_tool_call`` item as a chat tool call."""
    if item.get("type") == "custom_tool_call":
        arguments = json.dumps({CUSTOM_INPUT: str(item.get("input", ""))})
    else:
        raw = item.get("arguments", "")
        arguments = raw if isinstance(raw, str) else json.dumps(raw)
    return {
        "id": str(item.get("call_id") or item.get("id") or new_id("call")),
        "type": "function",
        "function": {"name": str(item.get("name", "")), "arguments": arguments},
    }


def items_to_messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Responses input items -> chat messages (see the module docstring)."""
    messages: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message":
            role = str(item.get("role") or "user")
            role = "system" if role == "developer" else role
            if role not in ("user", "assistant", "system"):
                continue
            messages.append({"role": role, "content": _content_to_chat(item.get("content"), role)})
        elif kind in ("function_call", "custom_tool_call"):
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(_call_of(item))
                if not last.get("content"):
                    last["content"] = None
            else:
                messages.append(
                    {"role": "assistant", "content": None, "tool_calls": [_call_of(item)]}
                )
        elif kind in ("function_call_output", "custom_tool_call_output"):
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": str(item.get("call_id", "")),
                    "content": _output_text(item.get("output", "")),
                }
            )
    return messages


def _tool_to_chat(tool: Any) -> dict[str, Any] | None:
    if not isinstance(tool, dict):
        return None
    if tool.get("type") == "function":
        function: dict[str, Any] = {
            "name": str(tool.get("name", "")),
            "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
        }
        if tool.get("description"):
            function["description"] = str(tool["description"])
        if tool.get("strict") is not None:
            function["strict"] = bool(tool["strict"])
        return {"type": "function", "function": function}
    if tool.get("type") == "custom":
        about = str(tool.get("description") or "")
        return {
            "type": "function",
            "function": {
                "name": str(tool.get("name", "")),
                "description": about,
                "parameters": {
                    "type": "object",
                    "properties": {CUSTOM_INPUT: {"type": "string", "description": "the input"}},
                    "required": [CUSTOM_INPUT],
                },
            },
        }
    return None  # built-in tools (web_search, file_search, …): nothing upstream runs them


def _tool_choice_to_chat(choice: Any) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") in ("function", "custom"):
        return {"type": "function", "function": {"name": str(choice.get("name", ""))}}
    return None


def _format_to_chat(text: Any) -> dict[str, Any] | None:
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_schema":
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        return {"type": "json_schema", "json_schema": schema}
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    return None


def to_chat(
    body: dict[str, Any], history: list[dict[str, Any]], model: str | None = None
) -> dict[str, Any]:
    """A Responses request -> a chat request. ``history``: the items of the conversation
    ``previous_response_id`` names (already resolved), which come before ``input``."""
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        messages.append({"role": "system", "content": instructions})
    messages += items_to_messages([*history, *input_items(body)])
    out: dict[str, Any] = {"model": model or body.get("model") or "default", "messages": messages}
    tools = [t for t in (_tool_to_chat(tool) for tool in body.get("tools") or []) if t]
    if tools:
        out["tools"] = tools
        choice = _tool_choice_to_chat(body.get("tool_choice"))
        if choice is not None:
            out["tool_choice"] = choice
        if isinstance(body.get("parallel_tool_calls"), bool):
            out["parallel_tool_calls"] = body["parallel_tool_calls"]
    if body.get("max_output_tokens") is not None:
        out["max_tokens"] = body["max_output_tokens"]
    for key in ("temperature", "top_p", "user"):
        if body.get(key) is not None:
            out[key] = body[key]
    response_format = _format_to_chat(body.get("text"))
    if response_format is not None:
        out["response_format"] = response_format
    if body.get("stream"):
        out["stream"] = True
        out["stream_options"] = {"include_usage": True}
    return out


# ---------------------------------------------------------------- chat -> response


def usage_of(usage: Any) -> dict[str, Any] | None:
    """Chat usage -> Responses usage."""
    if not isinstance(usage, dict):
        return None
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": int(cached)},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": int(reasoning)},
        "total_tokens": int(usage.get("total_tokens") or prompt + completion),
    }


def message_item(
    text: str, item_id: str | None = None, status: str = "completed"
) -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id or new_id("msg"),
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def call_item(
    call_id: str,
    name: str,
    arguments: str,
    custom: frozenset[str],
    item_id: str | None = None,
    status: str = "completed",
) -> dict[str, Any]:
    """A chat tool call as a ``function_call`` item, or a ``custom_tool_call`` when
    ``name`` is one of the request's custom tools."""
    if name in custom:
        try:
            parsed = json.loads(arguments) if arguments else {}
        except ValueError:
            parsed = {}
        given = parsed.get(CUSTOM_INPUT) if isinstance(parsed, dict) else None
        return {
            "type": "custom_tool_call",
            "id": item_id or new_id("ctc"),
            "call_id": call_id,
            "name": name,
            "input": given if isinstance(given, str) else arguments,
            "status": status,
        }
    return {
        "type": "function_call",
        "id": item_id or new_id("fc"),
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def response_object(
    request: dict[str, Any],
    response_id: str,
    *,
    output: list[dict[str, Any]],
    status: str,
    usage: dict[str, Any] | None,
    created_at: int | None = None,
    finish: str | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``response`` object echoing the request's settings, as the API returns it."""
    incomplete = {"reason": INCOMPLETE[finish]} if status == "incomplete" and finish else None
    text = request.get("text") if isinstance(request.get("text"), dict) else None
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at or int(time.time()),
        "status": status,
        "error": error,
        "incomplete_details": incomplete,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "model": request.get("model") or "",
        "output": output,
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "previous_response_id": request.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "store": request.get("store", True) is not False,
        "temperature": request.get("temperature"),
        "text": text or {"format": {"type": "text"}},
        "tool_choice": request.get("tool_choice") or "auto",
        "tools": request.get("tools") or [],
        "top_p": request.get("top_p"),
        "truncation": request.get("truncation") or "disabled",
        "usage": usage,
        "user": request.get("user"),
        "metadata": request.get("metadata") or {},
    }


def from_chat(chat: dict[str, Any], request: dict[str, Any], response_id: str) -> dict[str, Any]:
    """A ``chat.completion`` -> a ``response`` for ``request``."""
    choices = chat.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    choice = first if isinstance(first, dict) else {}
    message = choice.get("message") or {}
    custom = custom_tool_names(request)
    output: list[dict[str, Any]] = []
    text = text_of(message.get("content"))
    if text:
        output.append(message_item(text))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments", "")
        output.append(
            call_item(
                str(call.get("id") or new_id("call")),
                str(function.get("name", "")),
                arguments if isinstance(arguments, str) else json.dumps(arguments),
                custom,
            )
        )
    finish = choice.get("finish_reason")
    status = "incomplete" if finish in INCOMPLETE else "completed"
    return response_object(
        request,
        response_id,
        output=output,
        status=status,
        usage=usage_of(chat.get("usage")),
        created_at=chat.get("created") if isinstance(chat.get("created"), int) else None,
        finish=finish,
    )

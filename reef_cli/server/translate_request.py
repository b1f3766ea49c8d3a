"""Request translation between Anthropic Messages and OpenAI Chat Completions (pure functions).

Handles system prompts (string or blocks), mid-conversation ``role: system`` messages
(Claude Code sends them), text and image parts, tools, tool calls and tool results,
tool choice, stop sequences, sampling parameters and streaming options.
"""

from __future__ import annotations

import json
from typing import Any

DEFAULT_MAX_TOKENS = 4096


def text_of(content: Any) -> str:
    """Flatten string-or-blocks content to text (OpenAI parts or Anthropic blocks)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict):
                if block.get("type") in ("text", "input_text", "output_text"):
                    parts.append(str(block.get("text", "")))
                elif "text" in block:
                    parts.append(str(block["text"]))
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(parts)
    return str(content)


# ---------------------------------------------------------------- Anthropic -> OpenAI


def _a_image_to_o(block: dict[str, Any]) -> dict[str, Any]:
    source = block.get("source") or {}
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    else:
        url = str(source.get("url", ""))
    return {"type": "image_url", "image_url": {"url": url}}


def _a_user_to_o(content: Any) -> list[dict[str, Any]]:
    """One Anthropic user turn -> tool messages (for tool_result blocks) + a user message."""
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "tool_result":
            text = text_of(block.get("content"))
            if block.get("is_error"):
                text = f"[tool error] {text}"
            out.append(
                {"role": "tool", "tool_call_id": block.get("tool_use_id", ""), "content": text}
            )
        elif kind == "text":
            parts.append({"type": "text", "text": block.get("text", "")})
        elif kind == "image":
            parts.append(_a_image_to_o(block))
        elif kind == "document":
            parts.append({"type": "text", "text": text_of([block.get("source") or {}])})
    if parts:
        if all(p["type"] == "text" for p in parts):
            out.append({"role": "user", "content": "\n".join(p["text"] for p in parts)})
        else:
            out.append({"role": "user", "content": parts})
    return out


def _a_assistant_to_o(content: Any) -> dict[str, Any]:
    return anthropic_assistant_to_openai(content, "\n", ("tool_use", "server_tool_use"))


def anthropic_assistant_to_openai(
    content: Any, joiner: str, tool_kinds: tuple[str, ...] = ("tool_use",)
) -> dict[str, Any]:
    """Anthropic assistant content (text + tool_use blocks) -> an OpenAI assistant message.
    Shared by request history and response translation."""
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            texts.append(block.get("text", ""))
        elif block.get("type") in tool_kinds:
            calls.append(
                {
                    "id": block.get("id", ""),
                    "type": "function",
                    "function": {
                        "name": block.get("name", ""),
                        "arguments": json.dumps(block.get("input") or {}),
                    },
                }
            )
    msg: dict[str, Any] = {"role": "assistant", "content": joiner.join(texts) if texts else None}
    if calls:
        msg["tool_calls"] = calls
    return msg


def _a_tool_choice_to_o(choice: Any) -> Any:
    if not isinstance(choice, dict):
        return None
    kind = choice.get("type")
    if kind == "auto":
        return "auto"
    if kind == "any":
        return "required"
    if kind == "none":
        return "none"
    if kind == "tool":
        return {"type": "function", "function": {"name": choice.get("name", "")}}
    return None


def anthropic_to_openai(body: dict[str, Any], model: str | None = None) -> dict[str, Any]:
    """An Anthropic Messages request -> an OpenAI Chat Completions request."""
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        messages.append({"role": "system", "content": text_of(system)})
    for msg in body.get("messages") or []:
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")
        if role == "assistant":
            messages.append(_a_assistant_to_o(msg.get("content")))
        elif role == "system":
            messages.append({"role": "system", "content": text_of(msg.get("content"))})
        else:
            messages.extend(_a_user_to_o(msg.get("content")))
    out: dict[str, Any] = {"model": model or body.get("model"), "messages": messages}
    if "max_tokens" in body:
        out["max_tokens"] = body["max_tokens"]
    for key in ("temperature", "top_p"):
        if key in body:
            out[key] = body[key]
    if body.get("stop_sequences"):
        out["stop"] = body["stop_sequences"]
    if body.get("stream"):
        out["stream"] = True
        out["stream_options"] = {"include_usage": True}
    tools = [
        {
            "type": "function",
            "function": {
                "name": t.get("name", ""),
                "description": t.get("description", ""),
                "parameters": t.get("input_schema") or {"type": "object", "properties": {}},
            },
        }
        for t in body.get("tools") or []
        if isinstance(t, dict) and "name" in t and t.get("type") in (None, "custom")
    ]
    if tools:
        out["tools"] = tools
        choice = _a_tool_choice_to_o(body.get("tool_choice"))
        if choice is not None:
            out["tool_choice"] = choice
        if isinstance(body.get("tool_choice"), dict) and body["tool_choice"].get(
            "disable_parallel_tool_use"
        ):
            out["parallel_tool_calls"] = False
    meta = body.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("user_id"), str):
        out["user"] = meta["user_id"][:256]
    return out


# ---------------------------------------------------------------- OpenAI -> Anthropic


def _o_image_to_a(part: dict[str, Any]) -> dict[str, Any]:
    url = str((part.get("image_url") or {}).get("url", ""))
    if url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": head, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _o_content_to_blocks(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") in ("text", "input_text"):
            if part.get("text"):
                blocks.append({"type": "text", "text": part["text"]})
        elif part.get("type") == "image_url":
            blocks.append(_o_image_to_a(part))
    return blocks


def parse_tool_arguments(arguments: Any) -> Any:
    """OpenAI tool-call ``arguments`` (a JSON string) -> an Anthropic ``input`` object."""
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return {"_raw": arguments}
    return value if isinstance(value, dict) else {"_value": value}


def _o_tool_choice_to_a(choice: Any, parallel: Any) -> dict[str, Any] | None:
    out: dict[str, Any] | None
    if choice == "auto":
        out = {"type": "auto"}
    elif choice == "required":
        out = {"type": "any"}
    elif choice == "none":
        out = {"type": "none"}
    elif isinstance(choice, dict):
        out = {"type": "tool", "name": (choice.get("function") or {}).get("name", "")}
    else:
        out = None
    if parallel is False:
        out = out or {"type": "auto"}
        if out["type"] != "none":
            out["disable_parallel_tool_use"] = True
    return out


def openai_to_anthropic(body: dict[str, Any], model: str | None = None) -> dict[str, Any]:
    """An OpenAI Chat Completions request -> an Anthropic Messages request."""
    system_parts: list[str] = []
    turns: list[dict[str, Any]] = []
    started = False

    def push(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": list(blocks)})

    for msg in body.get("messages") or []:
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")
        if role in ("system", "developer"):
            text = text_of(msg.get("content"))
            if not started:
                system_parts.append(text)
            else:  # mid-conversation system message: keep its place, as a user-side note
                push(
                    "user",
                    [{"type": "text", "text": f"<system-reminder>\n{text}\n</system-reminder>"}],
                )
            continue
        started = True
        if role == "assistant":
            blocks = _o_content_to_blocks(msg.get("content"))
            for call in msg.get("tool_calls") or []:
                fn = call.get("function") or {}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.get("id") or "toolu_reef",
                        "name": fn.get("name", ""),
                        "input": parse_tool_arguments(fn.get("arguments")),
                    }
                )
            push("assistant", blocks)
        elif role == "tool":
            push(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": msg.get("tool_call_id", ""),
                        "content": text_of(msg.get("content")),
                    }
                ],
            )
        else:
            push("user", _o_content_to_blocks(msg.get("content")))
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or DEFAULT_MAX_TOKENS
    out: dict[str, Any] = {
        "model": model or body.get("model"),
        "messages": turns,
        "max_tokens": max_tokens,
    }
    if system_parts:
        out["system"] = "\n\n".join(system_parts)
    for key in ("temperature", "top_p"):
        if body.get(key) is not None:
            out[key] = body[key]
    stop = body.get("stop")
    if stop:
        out["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    if body.get("stream"):
        out["stream"] = True
    tools = [
        {
            "name": (t.get("function") or {}).get("name", ""),
            "description": (t.get("function") or {}).get("description", ""),
            "input_schema": (t.get("function") or {}).get("parameters")
            or {"type": "object", "properties": {}},
        }
        for t in body.get("tools") or []
        if isinstance(t, dict) and t.get("type", "function") == "function"
    ]
    if tools:
        out["tools"] = tools
        choice = _o_tool_choice_to_a(body.get("tool_choice"), body.get("parallel_tool_calls"))
        if choice is not None:
            out["tool_choice"] = choice
    if isinstance(body.get("user"), str):
        out["metadata"] = {"user_id": body["user"]}
    return out

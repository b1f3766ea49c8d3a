"""Rebuild a whole response from a recorded stream, for the record (runs off the hot path)."""

from __future__ import annotations

import json
from typing import Any

from reef_cli.server.sse import iter_events


def _loads(data: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def openai_stream(raw: bytes) -> dict[str, Any]:
    """Chat-completion chunks -> one ``chat.completion`` object."""
    out: dict[str, Any] = {"object": "chat.completion", "choices": []}
    choices: dict[int, dict[str, Any]] = {}
    for _event, data in iter_events(raw):
        if data.strip() == "[DONE]":
            break
        chunk = _loads(data)
        if not isinstance(chunk, dict):
            continue
        if "error" in chunk:
            out["error"] = chunk["error"]
            continue
        if "reef" in chunk and not chunk.get("choices"):
            continue
        for key in ("id", "model", "created", "system_fingerprint"):
            if key in chunk and key not in out:
                out[key] = chunk[key]
        if chunk.get("usage"):
            out["usage"] = chunk["usage"]
        for choice in chunk.get("choices") or []:
            index = choice.get("index", 0)
            slot = choices.setdefault(
                index,
                {
                    "index": index,
                    "message": {"role": "assistant", "content": None},
                    "finish_reason": None,
                },
            )
            delta = choice.get("delta") or {}
            msg = slot["message"]
            if delta.get("content"):
                msg["content"] = (msg["content"] or "") + delta["content"]
            for key in ("reasoning_content", "reasoning"):
                if delta.get(key):
                    msg[key] = msg.get(key, "") + delta[key]
            for call in delta.get("tool_calls") or []:
                calls = msg.setdefault("tool_calls", [])
                i = call.get("index", len(calls))
                while len(calls) <= i:
                    calls.append(
                        {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
                    )
                if call.get("id"):
                    calls[i]["id"] = call["id"]
                fn = call.get("function") or {}
                if fn.get("name"):
                    calls[i]["function"]["name"] += fn["name"]
                if fn.get("arguments"):
                    calls[i]["function"]["arguments"] += fn["arguments"]
            if choice.get("finish_reason"):
                slot["finish_reason"] = choice["finish_reason"]
    out["choices"] = [choices[i] for i in sorted(choices)]
    return out


def anthropic_stream(raw: bytes) -> dict[str, Any]:
    """Messages stream events -> one ``message`` object."""
    message: dict[str, Any] = {"type": "message", "role": "assistant", "content": []}
    partial: dict[int, str] = {}
    for event, data in iter_events(raw):
        ev = _loads(data)
        if not isinstance(ev, dict):
            continue
        kind = ev.get("type") or event
        if kind == "message_start":
            message.update({k: v for k, v in (ev.get("message") or {}).items() if k != "content"})
            message.setdefault("content", [])
        elif kind == "content_block_start":
            index = ev.get("index", len(message["content"]))
            while len(message["content"]) <= index:
                message["content"].append({})
            message["content"][index] = dict(ev.get("content_block") or {})
        elif kind == "content_block_delta":
            index = ev.get("index", 0)
            if index >= len(message["content"]):
                continue
            block = message["content"][index]
            delta = ev.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif dtype == "input_json_delta":
                partial[index] = partial.get(index, "") + delta.get("partial_json", "")
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif dtype == "signature_delta":
                block["signature"] = delta.get("signature", "")
        elif kind == "content_block_stop":
            index = ev.get("index", 0)
            if index in partial and index < len(message["content"]):
                parsed = _loads(partial.pop(index) or "{}")
                message["content"][index]["input"] = parsed if parsed is not None else {}
        elif kind == "message_delta":
            message.update(ev.get("delta") or {})
            if ev.get("usage"):
                usage = dict(message.get("usage") or {})
                usage.update({k: v for k, v in ev["usage"].items() if v is not None})
                message["usage"] = usage
        elif kind == "error":
            message["error"] = ev.get("error", ev)
    return message


TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def responses_stream(raw: bytes) -> dict[str, Any]:
    """Responses API events -> one ``response`` object: the one the terminal event holds;
    for a stream cut off before it, the items and text that had been sent."""
    response: dict[str, Any] = {"object": "response", "status": "in_progress", "output": []}
    done: dict[int, dict[str, Any]] = {}
    text: dict[int, str] = {}
    for event, data in iter_events(raw):
        ev = _loads(data)
        if not isinstance(ev, dict):
            continue
        kind = ev.get("type") or event
        if kind in TERMINAL and isinstance(ev.get("response"), dict):
            return dict(ev["response"])
        if kind in ("response.created", "response.in_progress") and isinstance(
            ev.get("response"), dict
        ):
            response.update({k: v for k, v in ev["response"].items() if k != "output"})
        elif kind == "response.output_text.delta":
            index = int(ev.get("output_index") or 0)
            text[index] = text.get(index, "") + str(ev.get("delta") or "")
        elif kind == "response.output_item.done" and isinstance(ev.get("item"), dict):
            done[int(ev.get("output_index") or 0)] = ev["item"]
        elif kind == "error":
            response["error"] = {k: v for k, v in ev.items() if k != "sequence_number"}
    for index, partial in text.items():
        done.setdefault(
            index,
            {
                "type": "message",
                "role": "assistant",
                "status": "incomplete",
                "content": [{"type": "output_text", "text": partial}],
            },
        )
    response["output"] = [done[i] for i in sorted(done)]
    return response


def usage_of(dialect: str, response: Any) -> tuple[dict[str, Any] | None, int | None, int | None]:
    """``(usage, input_tokens, output_tokens)`` from a response object of ``dialect``."""
    if not isinstance(response, dict):
        return None, None, None
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return None, None, None
    if dialect == "anthropic":
        inp = usage.get("input_tokens")
        if isinstance(inp, int):
            inp += int(usage.get("cache_read_input_tokens") or 0)
            inp += int(usage.get("cache_creation_input_tokens") or 0)
        return usage, inp, usage.get("output_tokens")
    if dialect == "responses":
        return usage, usage.get("input_tokens"), usage.get("output_tokens")
    return usage, usage.get("prompt_tokens"), usage.get("completion_tokens")


def tokens_of(response: Any) -> tuple[dict[str, Any] | None, list[float] | None]:
    """``({"prompt": ids, "response": ids}, response logprobs)`` where an engine returned
    them in a non-streamed OpenAI answer (reefd's torch engine; SGLang with
    ``return_token_ids``), else ``(None, None)``. Both are what reefd trains from."""
    if not isinstance(response, dict):
        return None, None
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None, None
    choice = choices[0]
    ids = choice.get("token_ids")
    prompt = response.get("prompt_token_ids") or choice.get("prompt_token_ids")
    token_ids = (
        {"prompt": prompt, "response": ids}
        if isinstance(ids, list) and isinstance(prompt, list)
        else None
    )
    logprobs: list[float] | None = None
    given = choice.get("logprobs")
    content = given.get("content") if isinstance(given, dict) else None
    if isinstance(content, list):
        values = [item.get("logprob") for item in content if isinstance(item, dict)]
        numbers = [float(v) for v in values if isinstance(v, int | float)]
        if numbers and len(numbers) == len(content):
            logprobs = numbers
    return token_ids, logprobs

"""Make agent requests digestible for the embedded model, and tool calls parseable back.

Checked with llama-cpp-python 0.3.36 and SmolLM2-135M-Instruct: array ``content`` (as pi
sends), ``content: null`` with ``tool_calls`` and ``role: tool`` messages are rejected,
and ``tools`` are silently ignored. So requests are rewritten into plain text turns —
parts flattened, tool definitions and tool results rendered into the prompt, history
trimmed to fit the context — and every rewrite is named so the record can say what
changed. A reply that is a JSON tool call is turned back into ``tool_calls``.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

CHARS_PER_TOKEN = 3.5


def _text_of(content: Any) -> tuple[str, bool]:
    """Text of a message's content; True when it had to be flattened from parts."""
    if content is None:
        return "", False
    if isinstance(content, str):
        return content, False
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") in ("text", "input_text"):
                texts.append(str(part.get("text", "")))
            elif isinstance(part, dict):
                texts.append(f"[{part.get('type', 'part')} omitted]")
        return "\n".join(texts), True
    return str(content), True


def _tool_prompt(tools: list[dict[str, Any]]) -> str:
    lines = [
        "You can use tools. To call one, reply with only a JSON object like "
        '{"tool": "NAME", "arguments": {...}} and nothing else. Tools:'
    ]
    for tool in tools:
        fn = tool.get("function", tool)
        params = json.dumps(fn.get("parameters", {}).get("properties", {}))[:400]
        lines.append(f"- {fn.get('name')}: {str(fn.get('description', ''))[:300]} args {params}")
    return "\n".join(lines)


def adapt_request(
    body: dict[str, Any], context_tokens: int
) -> tuple[list[dict[str, str]], list[str]]:
    """OpenAI chat ``body`` -> plain ``[{role, content}]`` messages and the list of rewrites."""
    changes: set[str] = set()
    system: list[str] = []
    turns: list[dict[str, str]] = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        text, flattened = _text_of(message.get("content"))
        if flattened:
            changes.add("flattened-content-parts")
        if role in ("system", "developer"):
            system.append(text)
            if turns:
                changes.add("merged-mid-conversation-system")
            continue
        if role == "tool":
            changes.add("tool-results-as-text")
            turns.append({"role": "user", "content": f"Tool result: {text}"})
            continue
        if role == "assistant" and message.get("tool_calls"):
            changes.add("tool-calls-as-text")
            calls = [
                json.dumps(
                    {
                        "tool": c.get("function", {}).get("name"),
                        "arguments": c.get("function", {}).get("arguments"),
                    }
                )
                for c in message["tool_calls"]
                if isinstance(c, dict)
            ]
            text = "\n".join(filter(None, [text, *calls]))
        turns.append({"role": "assistant" if role == "assistant" else "user", "content": text})
    if body.get("tools"):
        changes.add("tools-in-prompt")
        system.append(_tool_prompt(body["tools"]))
    budget = int(context_tokens * CHARS_PER_TOKEN * 0.75) - int(
        (body.get("max_tokens") or body.get("max_completion_tokens") or 512) * CHARS_PER_TOKEN
    )
    system_text = "\n\n".join(s for s in system if s)
    if len(system_text) > budget // 2:
        system_text = system_text[: budget // 4] + "\n[…]\n" + system_text[-budget // 4 :]
        changes.add("trimmed-system-prompt")
    kept: list[dict[str, str]] = []
    used = len(system_text)
    for turn in reversed(turns):
        if used + len(turn["content"]) > budget and kept:
            changes.add("trimmed-history")
            break
        kept.append({**turn, "content": turn["content"][: max(200, budget - used)]})
        used += len(kept[-1]["content"])
    kept.reverse()
    messages = ([{"role": "system", "content": system_text}] if system_text else []) + kept
    if not kept:
        messages.append({"role": "user", "content": "Continue."})
    return messages, sorted(changes)


_CALL = re.compile(r"\{.*\}", re.DOTALL)


def parse_tool_call(text: str, tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """OpenAI ``tool_calls`` when ``text`` is a JSON call of a known tool, else None."""
    if not tools:
        return None
    names = {t.get("function", t).get("name") for t in tools}
    match = _CALL.search(text)
    if not match:
        return None
    try:
        data = json.loads(match.group(0))
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    name = data.get("tool") or data.get("name")
    if name not in names:
        return None
    arguments = data.get("arguments", data.get("args", {}))
    return [
        {
            "id": f"call_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {
                "name": name,
                "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
            },
        }
    ]

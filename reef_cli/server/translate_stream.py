"""Streaming translation: OpenAI chat chunks <-> Anthropic message events (state machines).

Each translator takes parsed upstream SSE events through ``feed(event, data)`` and returns
the bytes to send to the client; ``finish(tail)`` closes the stream, with ``tail`` (the
receipt event) placed just before the final ``[DONE]`` / ``message_stop``.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from reef_cli.server import sse
from reef_cli.server.translate_response import A_TO_O_STOP, O_TO_A_STOP, a_usage_to_o, o_usage_to_a


def _loads(data: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


class OpenAIToAnthropic:
    """Upstream speaks OpenAI chunks; the client expects Anthropic events."""

    def __init__(self, model: str | None = None) -> None:
        self.model = model or ""
        self.started = False
        self.open_index: int | None = None
        self.next_index = 0
        self.tools: dict[int, int] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] = {}
        self.errored = False
        self.saw_tool = False

    def _start(self, chunk: dict[str, Any]) -> bytes:
        self.started = True
        msg_id = "msg_" + str(chunk.get("id") or uuid.uuid4().hex).removeprefix("chatcmpl-")
        return sse.encode(
            {
                "type": "message_start",
                "message": {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": chunk.get("model") or self.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                },
            },
            event="message_start",
        )

    def _close_block(self) -> bytes:
        if self.open_index is None:
            return b""
        index, self.open_index = self.open_index, None
        return sse.encode({"type": "content_block_stop", "index": index}, "content_block_stop")

    def _open_block(self, block: dict[str, Any]) -> bytes:
        out = self._close_block()
        self.open_index = self.next_index
        self.next_index += 1
        return out + sse.encode(
            {"type": "content_block_start", "index": self.open_index, "content_block": block},
            "content_block_start",
        )

    def feed(self, event: str | None, data: str) -> bytes:
        if data.strip() == "[DONE]" or self.errored:
            return b""
        chunk = _loads(data)
        if not isinstance(chunk, dict):
            return b""
        if "error" in chunk:
            self.errored = True
            err = (
                chunk["error"] if isinstance(chunk["error"], dict) else {"message": chunk["error"]}
            )
            return sse.encode(
                {
                    "type": "error",
                    "error": {"type": "api_error", "message": err.get("message", "")},
                },
                "error",
            )
        out = b"" if self.started else self._start(chunk)
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in (chunk.get("choices") or [])[:1]:
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if text:
                if self.open_index is None or self.open_index in self.tools.values():
                    out += self._open_block({"type": "text", "text": ""})
                out += sse.encode(
                    {
                        "type": "content_block_delta",
                        "index": self.open_index,
                        "delta": {"type": "text_delta", "text": text},
                    },
                    "content_block_delta",
                )
            for call in delta.get("tool_calls") or []:
                i = call.get("index", 0)
                fn = call.get("function") or {}
                if i not in self.tools:
                    self.saw_tool = True
                    out += self._open_block(
                        {
                            "type": "tool_use",
                            "id": call.get("id") or f"toolu_{uuid.uuid4().hex[:24]}",
                            "name": fn.get("name", ""),
                            "input": {},
                        }
                    )
                    self.tools[i] = self.open_index  # type: ignore[assignment]
                if fn.get("arguments"):
                    out += sse.encode(
                        {
                            "type": "content_block_delta",
                            "index": self.tools[i],
                            "delta": {"type": "input_json_delta", "partial_json": fn["arguments"]},
                        },
                        "content_block_delta",
                    )
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return out

    def client_usage(self) -> dict[str, Any] | None:
        """What the upstream reported, in the client's dialect (None: it reported none)."""
        return o_usage_to_a(self.usage) if self.usage else None

    def finish(self, tail: bytes = b"", complete: bool = True) -> bytes:
        if self.errored:
            return tail
        out = b"" if self.started else self._start({})
        out += self._close_block()
        if complete:
            stop = O_TO_A_STOP.get(self.finish_reason or "stop", "end_turn")
            if self.saw_tool and stop == "end_turn":
                stop = "tool_use"
            out += sse.encode(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": o_usage_to_a(self.usage),
                },
                "message_delta",
            )
        out += tail
        if complete:
            out += sse.encode({"type": "message_stop"}, "message_stop")
        return out


class AnthropicToOpenAI:
    """Upstream speaks Anthropic events; the client expects OpenAI chunks."""

    def __init__(self, model: str | None = None, include_usage: bool = False) -> None:
        self.id = "chatcmpl-" + uuid.uuid4().hex
        self.model = model or ""
        self.created = int(time.time())
        self.include_usage = include_usage
        self.tools: dict[int, int] = {}
        self.stop_reason: str | None = None
        self.usage: dict[str, Any] = {}
        self.errored = False

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse.encode(
            {
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    def feed(self, event: str | None, data: str) -> bytes:
        if self.errored:
            return b""
        ev = _loads(data)
        if not isinstance(ev, dict):
            return b""
        kind = ev.get("type") or event
        if kind == "message_start":
            msg = ev.get("message") or {}
            if msg.get("id"):
                self.id = "chatcmpl-" + str(msg["id"]).removeprefix("msg_")
            self.model = msg.get("model") or self.model
            self.usage.update(msg.get("usage") or {})
            return self._chunk({"role": "assistant", "content": ""})
        if kind == "content_block_start":
            block = ev.get("content_block") or {}
            if block.get("type") == "tool_use":
                n = len(self.tools)
                self.tools[ev.get("index", 0)] = n
                return self._chunk(
                    {
                        "tool_calls": [
                            {
                                "index": n,
                                "id": block.get("id", ""),
                                "type": "function",
                                "function": {"name": block.get("name", ""), "arguments": ""},
                            }
                        ]
                    }
                )
            if block.get("type") == "text" and block.get("text"):
                return self._chunk({"content": block["text"]})
            return b""
        if kind == "content_block_delta":
            delta = ev.get("delta") or {}
            if delta.get("type") == "text_delta":
                return self._chunk({"content": delta.get("text", "")})
            if delta.get("type") == "input_json_delta" and ev.get("index") in self.tools:
                n = self.tools[ev["index"]]
                return self._chunk(
                    {
                        "tool_calls": [
                            {"index": n, "function": {"arguments": delta.get("partial_json", "")}}
                        ]
                    }
                )
            return b""
        if kind == "message_delta":
            self.stop_reason = (ev.get("delta") or {}).get("stop_reason") or self.stop_reason
            self.usage.update({k: v for k, v in (ev.get("usage") or {}).items() if v is not None})
            return b""
        if kind == "error":
            self.errored = True
            err = ev.get("error") or {}
            return sse.encode(
                {
                    "error": {
                        "message": err.get("message", "upstream error"),
                        "type": err.get("type"),
                    }
                }
            )
        return b""

    def client_usage(self) -> dict[str, Any] | None:
        """What the upstream reported, in the client's dialect (None: it reported none).
        The record takes it from here: a client that did not ask for
        ``stream_options.include_usage`` gets no usage chunk to assemble it from."""
        return a_usage_to_o(self.usage) if self.usage else None

    def finish(self, tail: bytes = b"", complete: bool = True) -> bytes:
        out = b""
        if complete and not self.errored:
            out += self._chunk({}, A_TO_O_STOP.get(self.stop_reason or "end_turn", "stop"))
            if self.include_usage:
                out += sse.encode(
                    {
                        "id": self.id,
                        "object": "chat.completion.chunk",
                        "created": self.created,
                        "model": self.model,
                        "choices": [],
                        "usage": a_usage_to_o(self.usage),
                    }
                )
        out += tail
        if complete:
            out += b"data: [DONE]\n\n"
        return out

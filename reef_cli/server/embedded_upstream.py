"""An OpenAI-compatible endpoint for the embedded model, for `reef serve` to proxy to.

It runs in-process (see ``embedded_engine``) and adapts each request first
(``embedded_adapt``); the rewrites are returned in the ``x-reef-adapted`` header and in a
``reef_adapted`` field, so the record of the exchange says what the model really saw.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from reef_cli.core import embedded, embedded_engine
from reef_cli.server.embedded_adapt import adapt_request, parse_tool_call


def _model_id() -> str:
    """The model this process loaded (before the first load: the one it will load)."""
    spec = embedded.REGISTRY.get(embedded_engine.loaded_name() or "")
    return spec.display if spec else embedded.current_name()


def _limits(body: dict[str, Any]) -> tuple[int, float]:
    max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or 512
    return max(1, min(int(max_tokens), 1024)), float(body.get("temperature") or 0.2)


def _completion(text: str, tools: Any, usage: dict[str, int], adapted: list[str]) -> dict[str, Any]:
    calls = parse_tool_call(text, tools)
    message: dict[str, Any] = {"role": "assistant", "content": None if calls else text}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": _model_id(),
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": usage,
        "reef_adapted": adapted,
    }


def _chunk(cid: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    data = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": _model_id(),
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(data)}\n\n".encode()


def _usage_chunk(cid: str, usage: dict[str, Any]) -> bytes:
    data = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": _model_id(),
        "choices": [],
        "usage": usage,
    }
    return f"data: {json.dumps(data)}\n\n".encode()


async def _generate_in_thread(
    messages: list[dict[str, str]], max_tokens: int, temperature: float
) -> AsyncIterator[str]:
    """Token texts as llama.cpp produces them, from a worker thread. A reader that goes
    away (the client hung up, so this generator is closed) stops the decoding at the next
    token: the thread closes the engine's stream, which frees the model (the sequential
    path's lock, the batched path's slot) for the requests still waiting."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | BaseException | None] = asyncio.Queue()
    gone = threading.Event()

    def put(item: str | BaseException | None) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the server's loop has closed: nobody reads any more
            gone.set()

    def work() -> None:
        parts = embedded_engine.chat_stream(
            messages, max_tokens=max_tokens, temperature=temperature
        )
        try:
            for part in parts:
                if gone.is_set():
                    return
                delta = part["choices"][0].get("delta", {}).get("content")
                if delta:
                    put(delta)
            put(None)
        except BaseException as exc:  # surfaced to the caller below
            put(exc)
        finally:
            parts.close()

    threading.Thread(target=work, name="reef-embedded-stream", daemon=True).start()
    try:
        while True:
            item = await queue.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        gone.set()


async def chat_completions(request: Request) -> Response:
    try:
        body = await request.json()
        assert isinstance(body, dict)
    except Exception:
        return JSONResponse({"error": {"message": "body must be a JSON object"}}, status_code=400)
    messages, adapted = adapt_request(body, embedded_engine.CONTEXT_TOKENS)
    max_tokens, temperature = _limits(body)
    headers = {"x-reef-adapted": ",".join(adapted) or "none"}
    tools = body.get("tools")
    if not body.get("stream"):
        raw = await asyncio.to_thread(
            embedded_engine.chat, messages, max_tokens=max_tokens, temperature=temperature
        )
        text = raw["choices"][0]["message"].get("content") or ""
        return JSONResponse(
            _completion(text, tools, raw.get("usage") or {}, adapted), headers=headers
        )

    cid = f"chatcmpl-{uuid.uuid4().hex[:16]}"

    async def stream() -> AsyncIterator[bytes]:
        yield _chunk(cid, {"role": "assistant", "content": ""})
        if tools:  # a tool call must be seen whole before it can be sent as one
            raw = await asyncio.to_thread(
                embedded_engine.chat, messages, max_tokens=max_tokens, temperature=temperature
            )
            text = raw["choices"][0]["message"].get("content") or ""
            calls = parse_tool_call(text, tools)
            if calls:
                call = {**calls[0], "index": 0}
                yield _chunk(cid, {"tool_calls": [call]})
                yield _chunk(cid, {}, "tool_calls")
            else:
                yield _chunk(cid, {"content": text})
                yield _chunk(cid, {}, "stop")
            usage = raw.get("usage") or {}
        else:
            pieces = 0
            async for piece in _generate_in_thread(messages, max_tokens, temperature):
                pieces += 1
                yield _chunk(cid, {"content": piece})
            yield _chunk(cid, {}, "stop")
            prompt = await asyncio.to_thread(embedded_engine.count_tokens, messages)
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": pieces,
                "total_tokens": prompt + pieces,
            }
        # The usage chunk (empty choices) that OpenAI sends with stream_options.include_usage.
        yield _usage_chunk(cid, usage)
        yield b"data: [DONE]\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)


async def models(_request: Request) -> Response:
    return JSONResponse(
        {
            "object": "list",
            "data": [
                {"id": _model_id(), "object": "model", "created": 0, "owned_by": "reef-embedded"}
            ],
        }
    )


def create_embedded_app() -> Starlette:
    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
        ]
    )

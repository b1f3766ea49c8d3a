"""A scripted OpenAI + Anthropic compatible model server, with a request log.

One app answers three dialects by path: ``/v1/chat/completions`` (OpenAI Chat),
``/v1/responses`` (OpenAI Responses) and ``/v1/messages`` (Anthropic Messages),
streaming or not, plus ``count_tokens`` and ``/v1/models``. What it answers is scripted
with ``Turn`` objects: text, tool calls, provider errors, an early stop (``finish``),
stalls before, during or between the chunks of the answer, and dropped connections.

    fake = FakeUpstream()
    fake.push(Turn(tool_calls=[("get_weather", {"city": "Paris"})]))
    with ServerThread(fake.app) as srv: ...   # srv.url + "/v1"
    fake.log[-1].body                          # what the proxy sent
    fake.answers[-1]                           # what /v1/responses answered (bytes)

Reusable by any test that needs a deterministic model (adapters, recipes, e2e).
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

# A stall test's ``read_timeout`` and the stall that outlasts it. The margin matters: the
# same timeout governs the normal requests such a test sends afterwards, and a loaded CI
# machine (a garbage collection in a process holding torch) can pause one by half a second.
SHORT_READ_TIMEOUT = 1.5
STALL = 3 * SHORT_READ_TIMEOUT


@dataclass
class Turn:
    text: str = "Hello from the fake model."
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    status: int = 200
    error: str | None = None
    stall: float = 0.0  # seconds before any answer
    stall_mid: float = 0.0  # seconds of silence after the first chunk (streams)
    drop_after: int | None = None  # stream: abort the connection after this many chunks
    chunks: int | None = None  # split text into this many deltas (default: by word)
    usage: tuple[int, int] = (11, 7)
    model: str | None = None
    finish: str | None = None  # "length": the answer stopped at the token limit
    pace: float = 0.0  # streams: seconds between any two chunks (each delta on its own)


@dataclass
class Logged:
    path: str
    query: str
    headers: dict[str, str]
    body: Any


class Dropped(Exception):
    """Raised inside a stream to make the server abort the connection."""


def _pieces(turn: Turn) -> list[str]:
    if not turn.text:
        return []
    if turn.chunks:
        n = max(1, turn.chunks)
        size = max(1, -(-len(turn.text) // n))
        return [turn.text[i : i + size] for i in range(0, len(turn.text), size)]
    words = turn.text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]


def _sse(data: Any, event: str | None = None) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "").encode() + f"data: {text}\n\n".encode()


class FakeUpstream:
    def __init__(
        self,
        script: list[Turn] | None = None,
        default: Turn | None = None,
        chooser: Callable[[str, dict[str, Any]], Turn | None] | None = None,
        models: list[str] | None = None,
    ) -> None:
        self._script: deque[Turn] = deque(script or [])
        self.default = default or Turn()
        self.chooser = chooser
        self.models = models or ["fake-model"]
        self.log: list[Logged] = []
        self.answers: list[bytes] = []  # /v1/responses: each answer as sent (body or stream)
        self._lock = threading.Lock()
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/v1/responses", self._responses, methods=["POST"]),
                Route("/v1/messages", self._anthropic, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count, methods=["POST"]),
                Route("/v1/embeddings", self._embeddings, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )

    def push(self, *turns: Turn) -> None:
        with self._lock:
            self._script.extend(turns)

    def _next(self, path: str, body: dict[str, Any]) -> Turn:
        if self.chooser is not None:
            chosen = self.chooser(path, body)  # None: the script answers
            if chosen is not None:
                return chosen
        with self._lock:
            return self._script.popleft() if self._script else self.default

    async def _record(self, request: Request) -> dict[str, Any]:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        with self._lock:
            self.log.append(
                Logged(request.url.path, request.url.query, dict(request.headers), body)
            )
        return body if isinstance(body, dict) else {}

    # ------------------------------------------------------------ OpenAI

    async def _openai(self, request: Request) -> Response:
        body = await self._record(request)
        turn = self._next("openai", body)
        if turn.stall:
            await asyncio.sleep(turn.stall)
        if turn.status >= 400:
            return JSONResponse(
                {"error": {"message": turn.error or "scripted failure", "type": "server_error"}},
                turn.status,
            )
        model = turn.model or body.get("model") or "fake-model"
        cid = "chatcmpl-" + uuid.uuid4().hex[:20]
        calls: list[dict[str, Any]] = [
            {
                "id": f"call_{i}_{uuid.uuid4().hex[:8]}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(turn.tool_calls)
        ]
        finish = turn.finish or ("tool_calls" if calls else "stop")
        usage = {
            "prompt_tokens": turn.usage[0],
            "completion_tokens": turn.usage[1],
            "total_tokens": sum(turn.usage),
        }
        if not body.get("stream"):
            msg: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
            if calls:
                msg["tool_calls"] = calls
            return JSONResponse(
                {
                    "id": cid,
                    "object": "chat.completion",
                    "created": 1700000000,
                    "model": model,
                    "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                    "usage": usage,
                }
            )

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
            return _sse(
                {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": 1700000000,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                }
            )

        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": p}) for p in _pieces(turn)]
        for i, call in enumerate(calls):
            args = call["function"]["arguments"]
            head = {"index": i, "id": call["id"], "type": "function"}
            events.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                **head,
                                "function": {"name": call["function"]["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            )
            half = len(args) // 2
            for part in (args[:half], args[half:]):
                events.append(
                    chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]})
                )
        events.append(chunk({}, finish))
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append(
                _sse(
                    {
                        "id": cid,
                        "object": "chat.completion.chunk",
                        "created": 1700000000,
                        "model": model,
                        "choices": [],
                        "usage": usage,
                    }
                )
            )
        events.append(b"data: [DONE]\n\n")
        return StreamingResponse(self._play(events, turn), media_type="text/event-stream")

    # ------------------------------------------------------------ Anthropic

    async def _anthropic(self, request: Request) -> Response:
        body = await self._record(request)
        turn = self._next("anthropic", body)
        if turn.stall:
            await asyncio.sleep(turn.stall)
        if turn.status >= 400:
            return JSONResponse(
                {
                    "type": "error",
                    "error": {"type": "api_error", "message": turn.error or "scripted failure"},
                },
                turn.status,
            )
        model = turn.model or body.get("model") or "fake-model"
        mid = "msg_" + uuid.uuid4().hex[:20]
        blocks: list[dict[str, Any]] = []
        if turn.text:
            blocks.append({"type": "text", "text": turn.text})
        for i, (name, args) in enumerate(turn.tool_calls):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{i}_{uuid.uuid4().hex[:8]}",
                    "name": name,
                    "input": args,
                }
            )
        stop = "tool_use" if turn.tool_calls else "end_turn"
        if turn.finish:
            stop = {"length": "max_tokens"}.get(turn.finish, turn.finish)
        usage = {"input_tokens": turn.usage[0], "output_tokens": turn.usage[1]}
        if not body.get("stream"):
            return JSONResponse(
                {
                    "id": mid,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": blocks,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                }
            )
        events = [
            _sse(
                {
                    "type": "message_start",
                    "message": {
                        "id": mid,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": turn.usage[0], "output_tokens": 1},
                    },
                },
                "message_start",
            ),
            _sse({"type": "ping"}, "ping"),
        ]
        index = 0
        if turn.text:
            events.append(
                _sse(
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                    "content_block_start",
                )
            )
            for p in _pieces(turn):
                events.append(
                    _sse(
                        {
                            "type": "content_block_delta",
                            "index": 0,
                            "delta": {"type": "text_delta", "text": p},
                        },
                        "content_block_delta",
                    )
                )
            events.append(_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
            index = 1
        for block in blocks:
            if block["type"] != "tool_use":
                continue
            events.append(
                _sse(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {
                            "type": "tool_use",
                            "id": block["id"],
                            "name": block["name"],
                            "input": {},
                        },
                    },
                    "content_block_start",
                )
            )
            partial = json.dumps(block["input"])
            half = len(partial) // 2
            for part in (partial[:half], partial[half:]):
                events.append(
                    _sse(
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": part},
                        },
                        "content_block_delta",
                    )
                )
            events.append(
                _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
            )
            index += 1
        events.append(
            _sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": turn.usage[1]},
                },
                "message_delta",
            )
        )
        events.append(_sse({"type": "message_stop"}, "message_stop"))
        return StreamingResponse(self._play(events, turn), media_type="text/event-stream")

    # ------------------------------------------------------------ OpenAI Responses

    async def _responses(self, request: Request) -> Response:
        """``POST /v1/responses`` in the official shape: a ``response`` object, or its
        event stream (``event:`` lines, ``sequence_number``s, ``response.completed``). A
        tool call to one of the request's ``custom`` tools comes back as a
        ``custom_tool_call`` whose ``input`` is the scripted ``args["input"]``."""
        body = await self._record(request)
        turn = self._next("responses", body)
        if turn.stall:
            await asyncio.sleep(turn.stall)
        if turn.status >= 400:
            error = {
                "error": {
                    "message": turn.error or "scripted failure",
                    "type": "server_error",
                    "param": None,
                    "code": None,
                }
            }
            with self._lock:
                self.answers.append(json.dumps(error).encode())
            return JSONResponse(error, turn.status)
        rid = "resp_" + uuid.uuid4().hex
        custom = {
            t.get("name")
            for t in body.get("tools") or []
            if isinstance(t, dict) and t.get("type") == "custom"
        }
        msg_id = "msg_" + uuid.uuid4().hex[:24]
        items: list[dict[str, Any]] = []
        if turn.text:
            items.append(
                {
                    "type": "message",
                    "id": msg_id,
                    "status": "completed",
                    "role": "assistant",
                    "content": [
                        {
                            "type": "output_text",
                            "text": turn.text,
                            "annotations": [],
                            "logprobs": [],
                        }
                    ],
                }
            )
        for i, (name, args) in enumerate(turn.tool_calls):
            call_id = f"call_{i}_{uuid.uuid4().hex[:8]}"
            if name in custom:
                items.append(
                    {
                        "type": "custom_tool_call",
                        "id": "ctc_" + uuid.uuid4().hex[:24],
                        "call_id": call_id,
                        "name": name,
                        "input": str(args.get("input", json.dumps(args))),
                        "status": "completed",
                    }
                )
            else:
                items.append(
                    {
                        "type": "function_call",
                        "id": "fc_" + uuid.uuid4().hex[:24],
                        "call_id": call_id,
                        "name": name,
                        "arguments": json.dumps(args),
                        "status": "completed",
                    }
                )
        usage = {
            "input_tokens": turn.usage[0],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": turn.usage[1],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": sum(turn.usage),
        }
        status = "incomplete" if turn.finish == "length" else "completed"

        def response(state: str, output: list[dict[str, Any]], used: Any) -> dict[str, Any]:
            return {
                "id": rid,
                "object": "response",
                "created_at": 1700000000,
                "status": state,
                "error": None,
                "incomplete_details": (
                    {"reason": "max_output_tokens"} if state == "incomplete" else None
                ),
                "instructions": body.get("instructions"),
                "max_output_tokens": body.get("max_output_tokens"),
                "model": turn.model or body.get("model") or "fake-model",
                "output": output,
                "parallel_tool_calls": body.get("parallel_tool_calls", True),
                "previous_response_id": body.get("previous_response_id"),
                "store": body.get("store", True) is not False,
                "temperature": body.get("temperature"),
                "text": {"format": {"type": "text"}},
                "tool_choice": body.get("tool_choice") or "auto",
                "tools": body.get("tools") or [],
                "top_p": body.get("top_p"),
                "truncation": "disabled",
                "usage": used,
                "metadata": body.get("metadata") or {},
            }

        if not body.get("stream"):
            data = json.dumps(response(status, items, usage)).encode()
            with self._lock:
                self.answers.append(data)
            return Response(data, media_type="application/json")

        events: list[bytes] = []

        def emit(kind: str, **fields: Any) -> None:
            data = {"type": kind, "sequence_number": len(events), **fields}
            events.append(_sse(data, kind))

        emit("response.created", response=response("in_progress", [], None))
        emit("response.in_progress", response=response("in_progress", [], None))
        for n, item in enumerate(items):
            where = {"output_index": n}
            if item["type"] == "message":
                part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
                opened = {**item, "status": "in_progress", "content": []}
                emit("response.output_item.added", **where, item=opened)
                at = {"item_id": item["id"], **where, "content_index": 0}
                emit("response.content_part.added", **at, part=part)
                for piece in _pieces(turn):
                    emit("response.output_text.delta", **at, delta=piece, logprobs=[])
                emit("response.output_text.done", **at, text=turn.text, logprobs=[])
                emit("response.content_part.done", **at, part=item["content"][0])
            else:
                key = "input" if item["type"] == "custom_tool_call" else "arguments"
                kind = (
                    "response.custom_tool_call_input"
                    if key == "input"
                    else "response.function_call_arguments"
                )
                opened = {**item, key: "", "status": "in_progress"}
                emit("response.output_item.added", **where, item=opened)
                value = item[key]
                half = len(value) // 2
                for piece in (value[:half], value[half:]):
                    emit(f"{kind}.delta", item_id=item["id"], **where, delta=piece)
                emit(f"{kind}.done", item_id=item["id"], **where, **{key: value})
            emit("response.output_item.done", **where, item=item)
        last = "response.incomplete" if status == "incomplete" else "response.completed"
        emit(last, response=response(status, items, usage))
        return StreamingResponse(self._play_kept(events, turn), media_type="text/event-stream")

    async def _play_kept(self, events: list[bytes], turn: Turn) -> AsyncIterator[bytes]:
        """``_play``, keeping what went out (up to a scripted drop) in ``answers``."""
        sent = bytearray()
        try:
            async for event in self._play(events, turn):
                sent += event
                yield event
        finally:
            with self._lock:
                self.answers.append(bytes(sent))

    async def _play(self, events: list[bytes], turn: Turn) -> AsyncIterator[bytes]:
        for i, event in enumerate(events):
            if turn.drop_after is not None and i >= turn.drop_after:
                raise Dropped("scripted mid-stream drop")
            yield event
            if i == 0 and turn.stall_mid:
                await asyncio.sleep(turn.stall_mid)
            if turn.pace and i < len(events) - 1:
                await asyncio.sleep(turn.pace)

    async def _count(self, request: Request) -> Response:
        body = await self._record(request)
        return JSONResponse({"input_tokens": len(json.dumps(body.get("messages"))) // 4})

    async def _embeddings(self, request: Request) -> Response:
        """A vector per input: its length in characters and in words (deterministic)."""
        body = await self._record(request)
        given = body.get("input")
        texts = [given] if isinstance(given, str) else [str(t) for t in given or []]
        return JSONResponse(
            {
                "object": "list",
                "model": body.get("model"),
                "data": [
                    {"object": "embedding", "index": i, "embedding": [len(t), len(t.split())]}
                    for i, t in enumerate(texts)
                ],
                "usage": {"prompt_tokens": sum(len(t.split()) for t in texts), "total_tokens": 0},
            }
        )

    async def _models(self, request: Request) -> Response:
        with self._lock:
            self.log.append(
                Logged(request.url.path, request.url.query, dict(request.headers), None)
            )
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "created": 0, "owned_by": "fake"}
                    for m in self.models
                ],
            }
        )

"""Chat-completion chunks -> Responses API stream events, as they arrive.

The events the official SDKs and Codex read, in order: ``response.created``,
``response.in_progress``; per output item ``response.output_item.added``, then for text
``response.content_part.added`` + ``response.output_text.delta`` … ``.done`` +
``response.content_part.done``, for a function call
``response.function_call_arguments.delta`` … ``.done``; ``response.output_item.done``;
last ``response.completed`` (or ``response.incomplete``) holding the whole response.
Every event carries a ``sequence_number``. Each item is closed before the next opens and
before the end, so the SDK's snapshot checks hold. A custom (freeform) tool's input comes
whole in its ``output_item.done``: the upstream streams it as JSON, which cannot be cut
into input deltas before it is complete.
"""

from __future__ import annotations

import json
import time
from typing import Any

from reef_cli.server import sse
from reef_cli.server import translate_responses as tr


class ChatToResponses:
    """Feed chat SSE events (``feed``), end with ``finish``; each returns bytes to send."""

    def __init__(self, request: dict[str, Any], response_id: str) -> None:
        self.request = request
        self.id = response_id
        self.created_at = int(time.time())
        self.custom = tr.custom_tool_names(request)
        self.seq = 0
        self.started = False
        self.output: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None  # the item being streamed
        self.calls: dict[int, dict[str, Any]] = {}  # chat tool-call index -> its item
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None
        self.final: dict[str, Any] | None = None  # the response the stream ended with

    # ------------------------------------------------------------ events

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return sse.encode(data, event=kind)

    def _response(self, status: str) -> dict[str, Any]:
        return tr.response_object(
            self.request,
            self.id,
            output=list(self.output),
            status=status,
            usage=tr.usage_of(self.usage),
            created_at=self.created_at,
            finish=self.finish_reason,
            error=self.error,
        )

    def _start(self) -> bytes:
        self.started = True
        snapshot = self._response("in_progress")
        return self._event("response.created", response=snapshot) + self._event(
            "response.in_progress", response=snapshot
        )

    def _open_text(self) -> bytes:
        item = tr.message_item("", status="in_progress")
        item["content"] = []
        self.open = item
        index = len(self.output)
        self.output.append(item)
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        return self._event(
            "response.output_item.added", output_index=index, item=dict(item, content=[])
        ) + self._event(
            "response.content_part.added",
            item_id=item["id"],
            output_index=index,
            content_index=0,
            part=part,
        )

    def _open_call(self, call_id: str, name: str) -> bytes:
        item = tr.call_item(call_id, name, "", self.custom, status="in_progress")
        self.open = item
        self.output.append(item)
        return self._event(
            "response.output_item.added", output_index=len(self.output) - 1, item=dict(item)
        )

    def _close(self) -> bytes:
        """Close the open item: its ``done`` events; the item is final after this."""
        item, self.open = self.open, None
        if item is None:
            return b""
        index = self.output.index(item)
        out = b""
        if item["type"] == "message":
            text = "".join(item.pop("_text", ()))
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            item["content"] = [part]
            out += self._event(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=text,
                logprobs=[],
            )
            out += self._event(
                "response.content_part.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=part,
            )
        else:
            arguments = "".join(item.pop("_arguments", ()))
            done = tr.call_item(item["call_id"], item["name"], arguments, self.custom, item["id"])
            item.clear()
            item.update(done)
            if item["type"] == "function_call":
                out += self._event(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    arguments=arguments,
                )
        item["status"] = "completed"
        return out + self._event("response.output_item.done", output_index=index, item=item)

    # ------------------------------------------------------------ feeding

    def feed(self, _event: str | None, data: str) -> bytes:
        if self.error is not None or data.strip() == "[DONE]":
            return b""
        try:
            chunk = json.loads(data)
        except ValueError:
            return b""
        if not isinstance(chunk, dict):
            return b""
        out = b"" if self.started else self._start()
        if "error" in chunk:
            err = chunk.get("error")
            message = err.get("message") if isinstance(err, dict) else str(err)
            self.error = {"code": "server_error", "message": str(message or "upstream error")}
            return out + self._close()
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if text:
                if self.open is None or self.open["type"] != "message":
                    out += self._close() + self._open_text()
                assert self.open is not None
                self.open.setdefault("_text", []).append(text)  # joined once, at the end
                out += self._event(
                    "response.output_text.delta",
                    item_id=self.open["id"],
                    output_index=len(self.output) - 1,
                    content_index=0,
                    delta=text,
                    logprobs=[],
                )
            for call in delta.get("tool_calls") or []:
                out += self._feed_call(call)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return out

    def _feed_call(self, call: dict[str, Any]) -> bytes:
        out = b""
        index = call.get("index", len(self.calls))
        function = call.get("function") or {}
        item = self.calls.get(index)
        if item is None:
            out += self._close()
            call_id = str(call.get("id") or tr.new_id("call"))
            out += self._open_call(call_id, str(function.get("name") or ""))
            item = self.calls[index] = self.open  # type: ignore[assignment]
        elif item is not self.open:
            return b""  # a late piece of a call already closed: chat servers do not do this
        assert item is not None
        piece = function.get("arguments") or ""
        if piece:
            item.setdefault("_arguments", []).append(piece)
            if item["type"] == "function_call":
                out += self._event(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=len(self.output) - 1,
                    delta=piece,
                )
        return out

    def finish(self, tail: bytes = b"", complete: bool = True) -> bytes:
        """The end: close what is open, then the terminal event and ``tail`` (the receipt).
        ``complete=False``: the upstream broke off, so the response failed."""
        out = b"" if self.started else self._start()
        out += self._close()
        if not complete and self.error is None:
            self.error = {"code": "server_error", "message": "the upstream stream broke off"}
        if self.error is not None:
            self.final = self._response("failed")
            kind = "response.failed"
        elif self.finish_reason in tr.INCOMPLETE:
            self.final = self._response("incomplete")
            kind = "response.incomplete"
        else:
            self.final = self._response("completed")
            kind = "response.completed"
        out += self._event(kind, response=self.final)
        added = sse.numbered(tail, self.seq)  # the receipt (an error) continues the numbers
        self.seq += sum(1 for _ in sse.iter_events(tail))
        return out + added


class Chained:
    """Two stream translators in a row (Anthropic -> chat -> Responses): the first one's
    output bytes are parsed again and fed to the second."""

    def __init__(self, first: Any, second: ChatToResponses) -> None:
        self.first = first
        self.second = second

    @property
    def final(self) -> dict[str, Any] | None:
        return self.second.final

    def feed(self, event: str | None, data: str) -> bytes:
        return self._on(self.first.feed(event, data))

    def _on(self, raw: bytes) -> bytes:
        return b"".join(self.second.feed(ev, data) for ev, data in sse.iter_events(raw))

    def finish(self, tail: bytes = b"", complete: bool = True) -> bytes:
        return self._on(self.first.finish(complete=complete)) + self.second.finish(tail, complete)

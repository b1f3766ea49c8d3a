"""The receipt as a final stream event, shaped so official SDKs pass over it.

- OpenAI: a ``chat.completion.chunk`` with ``choices: []`` (like the usage chunk that
  ``stream_options.include_usage`` produces) carrying a ``reef`` object.
- Anthropic: a ``ping`` event (SDKs skip pings) carrying a ``reef`` object.
- Responses: a ``reef.receipt`` event after the terminal one (SDKs pass over event types
  they do not know).
"""

from __future__ import annotations

import time

from reef_cli.server import sse

RECORD_HEADER = "x-reef-agent-record-id"
# request: the release the client has installed (credited when valid); response: the
# release the record is credited to
RELEASE_HEADER = "x-reef-release-id"
# response, only when the request's x-reef-release-id was ignored: why
RELEASE_NOTE_HEADER = "x-reef-release-note"
RESPONSES_RECEIPT = "reef.receipt"  # the Responses stream's receipt event


def receipt_event(dialect: str, record_id: str, release_id: int | None) -> bytes:
    reef = {"record_id": record_id, "release_id": release_id}
    if dialect == "anthropic":
        return sse.encode({"type": "ping", "reef": reef}, event="ping")
    if dialect == "responses":
        return sse.encode({"type": RESPONSES_RECEIPT, **reef}, event=RESPONSES_RECEIPT)
    return sse.encode(
        {
            "id": record_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": "reef",
            "choices": [],
            "reef": reef,
        }
    )


def headers(record_id: str, release_id: int | None, note: str | None = None) -> dict[str, str]:
    out = {
        RECORD_HEADER: record_id,
        RELEASE_HEADER: "" if release_id is None else str(release_id),
    }
    if note:
        out[RELEASE_NOTE_HEADER] = note
    return out

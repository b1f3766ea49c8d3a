"""Usage reaches the record of every streamed answer, whichever dialects meet.

A translated stream's usage comes from the upstream's own events (Anthropic's
``message_start`` / ``message_delta``, OpenAI's usage chunk), not from what the client
happened to ask for: an OpenAI client that did not send ``stream_options.include_usage``
gets no usage chunk, yet its record still holds what the upstream reported.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from reef_cli.server.receipts import RECORD_HEADER
from reef_cli.server.recorder import Exchange, _end, from_journal, to_record
from tests.fakes.upstream import Turn
from tests.server.conftest import TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}"}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
MSG = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
RESP = {"model": "m", "input": "hi", "stream": True}


def stream(stack: Any, path: str, body: dict[str, Any]) -> tuple[str, str]:
    with httpx.stream("POST", stack.url + path, json=body, headers=AUTH, timeout=10) as r:
        assert r.status_code == 200
        text = r.read().decode()
    return text, r.headers[RECORD_HEADER]


def chunks(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(json.loads(line[len("data: ") :]))
    return out


def record(stack: Any, receipt: str) -> Any:
    stack.flush()
    return stack.store().get(receipt)


@pytest.mark.parametrize("include", [False, True])
def test_openai_client_anthropic_upstream(make_stack, include):
    stack = make_stack("anthropic")
    stack.fake.push(Turn(text="two words", usage=(23, 5)))
    body = {**CHAT, **({"stream_options": {"include_usage": True}} if include else {})}
    text, receipt = stream(stack, "/v1/chat/completions", body)
    usage_chunks = [c["usage"] for c in chunks(text) if c.get("usage")]
    want = {"prompt_tokens": 23, "completion_tokens": 5, "total_tokens": 28}
    # the client sees a usage chunk exactly when it asked for one
    assert usage_chunks == ([want] if include else [])
    rec = record(stack, receipt)
    assert rec.stream and rec.status == 200
    assert rec.usage == want
    assert (rec.input_tokens, rec.output_tokens) == (23, 5)


def test_anthropic_client_openai_upstream(make_stack):
    stack = make_stack("openai")
    stack.fake.push(Turn(text="two words", usage=(23, 5)))
    text, receipt = stream(stack, "/v1/messages", {**MSG, "stream": True})
    # the upstream was asked for its usage chunk though the client cannot ask for one
    assert stack.fake.log[-1].body["stream_options"] == {"include_usage": True}
    deltas = [c for c in chunks(text) if c.get("type") == "message_delta"]
    assert deltas[-1]["usage"] == {"input_tokens": 23, "output_tokens": 5}
    rec = record(stack, receipt)
    assert (rec.input_tokens, rec.output_tokens) == (23, 5)


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_responses_client_translated(make_stack, dialect):
    stack = make_stack(dialect)
    stack.fake.push(Turn(text="two words", usage=(23, 5)))
    _text, receipt = stream(stack, "/v1/responses", RESP)
    rec = record(stack, receipt)
    assert rec.stream and rec.status == 200
    assert (rec.input_tokens, rec.output_tokens) == (23, 5)


@pytest.mark.parametrize(
    ("dialect", "path", "body"),
    [
        ("openai", "/v1/chat/completions", CHAT),
        ("anthropic", "/v1/messages", {**MSG, "stream": True}),
        ("openai", "/v1/responses", RESP),
    ],
)
def test_same_dialect_streams_keep_their_usage(make_stack, dialect, path, body):
    """Relayed as is: the usage the stream carries is the record's (chat: when asked)."""
    options = {"upstream_responses": True} if path == "/v1/responses" else {}
    stack = make_stack(dialect, **options)
    stack.fake.push(Turn(text="two words", usage=(23, 5)))
    if path == "/v1/chat/completions":
        body = {**body, "stream_options": {"include_usage": True}}
    _text, receipt = stream(stack, path, body)
    rec = record(stack, receipt)
    assert (rec.input_tokens, rec.output_tokens) == (23, 5)


def test_usage_survives_the_journal():
    """A stream whose row was not yet written when the server died is rebuilt from the
    journal: its end entry carries the translated usage too."""
    from reef_cli.server import journal

    ex = Exchange(
        id="rec_" + "0" * 24,
        scenario="default",
        release_id=None,
        client_dialect="openai",
        upstream_dialect="anthropic",
        request=json.dumps(CHAT).encode(),
        stream=True,
        status=200,
        usage={"prompt_tokens": 23, "completion_tokens": 5, "total_tokens": 28},
    )
    chunk = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
    end = json.loads(json.dumps(_end(ex, "E")))  # as the journal stores it
    meta = {"id": ex.id, "scenario": "default", "client_dialect": "openai"}
    meta |= {"upstream_dialect": "anthropic", "stream": True}
    item = journal.Replayed(meta=meta, request=ex.request, chunks=[chunk], end=end)
    rec = to_record(from_journal(item))
    assert (rec.input_tokens, rec.output_tokens) == (23, 5)

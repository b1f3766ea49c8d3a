"""The embedded model's OpenAI server (``server/embedded_upstream.py``): a client that
hangs up mid-stream stops the decoding at the next token (issue 25), instead of letting
the model write the whole answer for nobody while other requests wait for it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx

from reef_cli.core import embedded_engine
from reef_cli.server.embedded_upstream import create_embedded_app
from tests.fakes.server_thread import ServerThread

WAIT = 30.0  # an upper bound for what happens by itself, never a timing claim


def test_a_client_that_hangs_up_stops_the_decoding(monkeypatch: Any) -> None:
    closed = threading.Event()
    decoded: list[int] = []

    def endless(messages: Any, *, max_tokens: int, temperature: float) -> Iterator[dict]:
        try:
            for i in range(100_000):  # far more than any test reads
                decoded.append(i)
                yield {"choices": [{"delta": {"content": f"t{i} "}}]}
                time.sleep(0.005)
        finally:
            closed.set()  # the engine's stream was closed: its lock or slot is free

    monkeypatch.setattr(embedded_engine, "chat_stream", endless)
    with ServerThread(create_embedded_app()) as server:
        body = {"messages": [{"role": "user", "content": "count"}], "stream": True}
        with httpx.stream("POST", server.url + "/v1/chat/completions", json=body) as r:
            assert r.status_code == 200
            seen = 0
            for line in r.iter_lines():
                seen += '"content": "t' in line
                if seen == 3:
                    break  # and hang up
        assert closed.wait(WAIT), "the decoding went on after the client left"
        stopped_at = len(decoded)
        time.sleep(0.2)
        assert len(decoded) == stopped_at < 100_000


def test_a_whole_stream_still_ends_with_usage(monkeypatch: Any) -> None:
    def three(messages: Any, *, max_tokens: int, temperature: float) -> Iterator[dict]:
        for word in ("one ", "two ", "three"):
            yield {"choices": [{"delta": {"content": word}}]}

    monkeypatch.setattr(embedded_engine, "chat_stream", three)
    monkeypatch.setattr(embedded_engine, "count_tokens", lambda messages: 4)
    with ServerThread(create_embedded_app()) as server:
        body = {"messages": [{"role": "user", "content": "count"}], "stream": True}
        text = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=WAIT).text
    assert '"content": "one "' in text and '"content": "three"' in text
    assert '"completion_tokens": 3' in text and text.rstrip().endswith("data: [DONE]")

"""What `reef serve` holds is bounded by bytes: an upstream answer past ``max_answer_bytes``
is cut off with a 502 in the caller's dialect (a stream ends with its error event) and
still recorded; the conversation cache weighs a turn by its answer too; a streamed
Responses answer is assembled in linear time; the allocator hands memory back."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import time
import tracemalloc

import httpx
import pytest

from reef_cli.server import memory
from reef_cli.server.conversations import Conversations, Turn, weigh
from reef_cli.server.receipts import RECORD_HEADER
from reef_cli.server.responses_stream import ChatToResponses
from tests.fakes.upstream import FakeUpstream
from tests.fakes.upstream import Turn as Scripted
from tests.server.conftest import ROUTE_BODIES, TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}", "anthropic-version": "2023-06-01"}
CAP = 64 * 1024
BIG = Scripted(text="word " * (3 * CAP // 5), chunks=16)  # 3x the cap
# (upstream dialect, options, client path): relayed as bytes and translated, each dialect
ROUTES = [
    ("openai", {}, "/v1/chat/completions"),
    ("openai", {}, "/v1/messages"),
    ("openai", {}, "/v1/responses"),
    ("openai", {"upstream_responses": True}, "/v1/responses"),
    ("anthropic", {}, "/v1/messages"),
    ("anthropic", {}, "/v1/chat/completions"),
    ("anthropic", {}, "/v1/responses"),
]
ROUTE_IDS = ["chat", "messages>chat", "responses>chat", "responses", "messages", "chat>messages",
             "responses>messages"]  # fmt: skip


def error_message(path: str, body: dict) -> str:
    """The message of an error body in the dialect of ``path``."""
    if path == "/v1/messages":
        assert body["type"] == "error"
    return str(body["error"]["message"])


def sent_of_answer(path: str, stream: str) -> int:
    """How much of the answer a stream carried: a Responses stream's text deltas (its
    closing events, response.failed included, repeat the text so far, as the API has
    them: up to five times what came, so its bytes say nothing of where it stopped); any
    other stream's bytes."""
    if path != "/v1/responses":
        return len(stream)
    events = (json.loads(line[6:]) for line in stream.splitlines() if line.startswith("data: "))
    return sum(len(e["delta"]) for e in events if e.get("type") == "response.output_text.delta")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize(("dialect", "options", "path"), ROUTES, ids=ROUTE_IDS)
def test_an_answer_past_the_cap_is_a_502_and_still_recorded(
    make_stack, dialect, options, path, stream
):
    fake = FakeUpstream(default=BIG)
    stack = make_stack(dialect, fake=fake, max_answer_bytes=CAP, **options)
    body = {**ROUTE_BODIES[path], "stream": stream}
    r = httpx.post(stack.url + path, json=body, headers=AUTH, timeout=30)
    receipt = r.headers[RECORD_HEADER]
    if not stream:
        assert r.status_code == 502, r.text
        message = error_message(path, r.json())
        assert f"{CAP}-byte limit" in message and "max_answer_bytes" in message
        assert len(r.content) < 4096  # nothing of the answer itself
    else:
        assert r.status_code == 200  # the headers went out before the answer grew
        text = r.text
        assert sent_of_answer(path, text) < 2 * CAP  # it stopped near the cap, not at the end
        tail = text[max(0, text.index("max_answer_bytes") - 400) :]
        if path == "/v1/chat/completions":
            assert '"error"' in tail and "[DONE]" not in text
        else:  # Anthropic and Responses streams: an `error` event
            assert "event: error" in tail
        if path == "/v1/responses" and "upstream_responses" not in options:
            assert "response.failed" in text  # the translated stream ends failed
        assert receipt in text  # the receipt event still comes
    stack.flush()
    rec = stack.store().get(receipt)
    assert rec.status == 502 and "max_answer_bytes" in (rec.error or "")
    assert rec.stream is stream
    # an answer within the cap still goes through on the same server
    fake.push(Scripted(text="short"))
    assert httpx.post(stack.url + path, json=body, headers=AUTH, timeout=30).status_code == 200


def test_a_model_list_past_the_cap_is_refused(make_stack):
    fake = FakeUpstream(models=[f"model-{n:06d}-{'x' * 64}" for n in range(2000)])
    stack = make_stack("openai", fake=fake, max_answer_bytes=CAP)
    r = httpx.get(stack.url + "/v1/models", headers=AUTH, timeout=30)
    assert r.status_code == 502 and "max_answer_bytes" in r.json()["error"]["message"]


def test_the_cap_is_a_serve_flag_and_a_serve_yaml_key(tmp_path):
    from reef_cli.server import serve_config as config

    path = tmp_path / "serve.yaml"
    path.write_text("max-answer-bytes: 4096\n")
    assert config.build(config.load_file(path)).max_answer_bytes == 4096
    assert config.build({}).max_answer_bytes == 32 * 1024 * 1024
    with pytest.raises(config.ServeError, match="max_answer_bytes"):
        config.build({"max_answer_bytes": 10})


# ------------------------------------------------------------------ the conversation cache


def big_turn(n: int, size: int = 1 << 20) -> Turn:
    """A small request with a ``size``-character answer, parsed as the proxy has it."""
    answer = {"id": f"resp_{n}", "output": [{"type": "message", "content": [
        {"type": "output_text", "text": chr(97 + n % 26) * size}]}]}  # fmt: skip
    request = {"model": "m", "input": f"question {n}"}
    return Turn("s", json.loads(json.dumps(request)), json.loads(json.dumps(answer)))


def test_a_turn_weighs_its_answer_not_only_its_request() -> None:
    """Small requests with 1 MiB answers: a 3 MiB budget keeps two of them, not all."""
    cache = Conversations(None, size=512, max_bytes=3 << 20)
    for n in range(5):
        cache.remember(f"resp_{n}", big_turn(n))
    assert (2 << 20) < cache.weight <= 3 << 20
    assert asyncio.run(cache.history("s", "resp_0")) is None  # pushed out by bytes
    assert asyncio.run(cache.history("s", "resp_4")) is not None


def test_a_turn_heavier_than_the_budget_is_not_kept_and_pushes_nothing_out() -> None:
    cache = Conversations(None, size=512, max_bytes=3 << 20)
    cache.remember("resp_1", big_turn(1))
    cache.remember("resp_2", big_turn(2, size=4 << 20))
    assert asyncio.run(cache.history("s", "resp_2")) is None
    assert asyncio.run(cache.history("s", "resp_1")) is not None
    assert cache.weight <= 3 << 20


@pytest.mark.parametrize("shape", ["text", "many-items"])
def test_the_weight_is_what_the_turns_hold_in_memory(shape) -> None:
    """``weigh`` agrees with what tracemalloc sees the kept turns allocate (within 1.5x
    either way), for one large string and for many small items."""
    items = 1 if shape == "text" else 20_000
    each = (1 << 20) // items
    output = [{"type": "message", "content": [{"type": "output_text", "text": "é" * each}]}
              for _ in range(items)]  # fmt: skip
    raw = json.dumps({"id": "resp_x", "output": output}).encode()
    request_raw = json.dumps({"model": "m", "input": "q" * 1000}).encode()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        turn = Turn("s", json.loads(request_raw), json.loads(raw))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    weight = weigh(turn.request) + weigh(turn.response)
    assert held / 1.5 <= weight <= held * 1.5, (weight, held)


def test_the_proxy_keeps_responses_turns_within_the_cache_bytes(make_stack) -> None:
    """Through the proxy, streamed and not: the cache stays within its bytes, and a turn
    that fell out is still continued (read back from the records)."""
    fake = FakeUpstream(default=Scripted(text="word " * (1 << 18), chunks=8))  # ~1.3 MB
    stack = make_stack("openai", fake=fake)
    cache = stack.app.state.proxy.conversations
    cache.max_bytes = 4 << 20
    ids = []
    for n in range(6):
        body = {"model": "m", "input": f"q{n}", "stream": n % 2 == 1}
        r = httpx.post(stack.url + "/v1/responses", json=body, headers=AUTH, timeout=30)
        assert r.status_code == 200
        ids.append("resp_" + r.headers[RECORD_HEADER].removeprefix("rec_"))
    assert (1 << 20) < cache.weight <= 4 << 20
    stack.flush()
    for previous in (ids[0], ids[-1]):  # fell out / kept
        fake.push(Scripted(text="ok"))
        body = {"model": "m", "input": "next", "previous_response_id": previous}
        r = httpx.post(stack.url + "/v1/responses", json=body, headers=AUTH, timeout=30)
        assert r.status_code == 200, r.text
        sent = fake.log[-1].body["messages"]
        assert [m["role"] for m in sent] == ["user", "assistant", "user"]
        assert len(sent[1]["content"]) > 1 << 20  # the earlier answer, whole


# ------------------------------------------------------------------ stream assembly


def _translate(deltas: int) -> float:
    """Seconds to turn ``deltas`` chat chunks of 100 characters into Responses events."""
    piece = json.dumps({"choices": [{"index": 0, "delta": {"content": "x" * 100}}]})
    tr = ChatToResponses({"model": "m", "input": "q"}, "resp_t")
    started = time.perf_counter()
    for _ in range(deltas):
        tr.feed(None, piece)
    tr.finish()
    took = time.perf_counter() - started
    assert tr.final is not None
    assert len(tr.final["output"][0]["content"][0]["text"]) == deltas * 100
    return took


def test_a_streamed_responses_answer_is_assembled_in_linear_time() -> None:
    """8x the deltas takes about 8x as long (the old text concatenation took ~64x)."""
    small = min(_translate(5_000) for _ in range(2))
    large = min(_translate(40_000) for _ in range(2))
    assert large / small < 20, (small, large)


# ------------------------------------------------------------------ the allocator


def test_the_trimmer_runs_only_after_enough_bytes_and_a_quiet_moment() -> None:
    quiet = memory.Trimmer(after_bytes=1000, quiet_s=0.0)
    quiet.note(999)
    quiet.run_once()
    assert quiet.trims == 0  # not enough relayed yet
    quiet.note(1)
    quiet.run_once()
    assert quiet.trims == 1 and quiet.pending == 0
    busy = memory.Trimmer(after_bytes=1000, quiet_s=3600.0)
    busy.note(10_000)
    busy.run_once()
    assert busy.trims == 0 and busy.pending == 10_000  # an answer just finished: later


@pytest.mark.skipif(memory._libc() is None, reason="mallopt is glibc's")
def test_tune_leaves_a_setting_the_operator_made(monkeypatch) -> None:
    for env in memory.SETTINGS:
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    applied = memory.tune()
    assert set(applied) == set(memory.SETTINGS) - {"MALLOC_ARENA_MAX"}
    assert "MALLOC_ARENA_MAX" in os.environ

"""`POST /v1/responses` with ``stream: true``: the event sequence the SDKs and Codex read,
deltas relayed as they arrive, tool calls, the receipt event last, failures mid-stream,
and the record of a stream, for each upstream mode."""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

import httpx
import pytest

from reef_cli.core import scenarios
from reef_cli.server import sse
from reef_cli.server.receipts import RECORD_HEADER, RELEASE_HEADER
from tests.fakes.upstream import SHORT_READ_TIMEOUT, STALL, Turn
from tests.server.test_responses_api import (
    AUTH,
    MODES,
    PATCH,
    PATH,
    WEATHER,
    output_text,
    record,
    stack_for,
)

STREAM = {"model": "m", "input": "count", "stream": True}
TEXT_EVENTS = [
    "response.output_item.added",
    "response.content_part.added",
    # ... response.output_text.delta, one per upstream delta
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
]


def stream(stack, body: dict[str, Any], headers: dict[str, str] | None = None):
    """(the response, its events as (event name, data)) of a whole stream."""
    with httpx.stream(
        "POST", stack.url + PATH, json=body, headers=headers or AUTH, timeout=10
    ) as r:
        raw = r.read()
    assert r.status_code == 200, raw[:300]
    assert r.headers["content-type"].startswith("text/event-stream")
    return r, [(event, json.loads(data)) for event, data in sse.iter_events(raw)]


def check_framing(events: list[tuple[str | None, dict[str, Any]]]) -> None:
    """Every event names its type on its ``event:`` line; sequence numbers count up."""
    for event, data in events:
        assert event == data["type"], (event, data)
    # the receipt and an error event Reef adds: test_added_events_continue_the_sequence
    body = [data for _, data in events if data["type"] not in ("reef.receipt", "error")]
    assert [data["sequence_number"] for data in body] == list(range(len(body)))


def of_type(events, kind: str) -> list[dict[str, Any]]:
    return [data for _, data in events if data["type"] == kind]


def check_receipt(r: httpx.Response, events) -> str:
    """The last event is the receipt, after the terminal event, naming the record."""
    receipt = r.headers[RECORD_HEADER]
    last = events[-1][1]
    assert last["type"] == "reef.receipt" and last["record_id"] == receipt
    assert last["release_id"] is None and r.headers[RELEASE_HEADER] == ""
    return receipt


@pytest.mark.parametrize("mode", ["chat", "anthropic"])
def test_text_stream_events(make_stack, mode):
    stack = stack_for(make_stack, mode)
    stack.fake.push(Turn(text="one two three four"))
    r, events = stream(stack, STREAM)
    check_framing(events)
    kinds = [data["type"] for _, data in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-2:] == ["response.completed", "reef.receipt"]
    deltas = [d for d in kinds if d == "response.output_text.delta"]
    assert [k for k in kinds[2:-2] if k != "response.output_text.delta"] == TEXT_EVENTS
    assert kinds[4 : 4 + len(deltas)] == deltas  # the deltas sit between part added / done
    assert [d["delta"] for d in of_type(events, "response.output_text.delta")] == [
        "one ",
        "two ",
        "three ",
        "four",
    ]
    created = of_type(events, "response.created")[0]["response"]
    assert created["id"].startswith("resp_") and created["status"] == "in_progress"
    added = of_type(events, "response.output_item.added")[0]
    assert added["output_index"] == 0 and added["item"]["type"] == "message"
    item_id = added["item"]["id"]
    for kind in ("response.output_text.delta", "response.output_text.done"):
        for data in of_type(events, kind):
            assert data["item_id"] == item_id and data["output_index"] == 0
            assert data["content_index"] == 0
    assert of_type(events, "response.output_text.done")[0]["text"] == "one two three four"
    done = of_type(events, "response.output_item.done")[0]["item"]
    assert done["id"] == item_id and done["status"] == "completed"
    assert done["content"][0]["text"] == "one two three four"
    final = of_type(events, "response.completed")[0]["response"]
    assert final["id"] == created["id"] and final["status"] == "completed"
    assert final["model"] == "m" and output_text(final) == "one two three four"
    assert final["usage"]["input_tokens"] == 11 and final["usage"]["output_tokens"] == 7
    assert final["usage"]["total_tokens"] == 18
    check_receipt(r, events)
    sent = stack.fake.log[-1].body
    assert sent["stream"] is True
    if mode == "chat":
        assert sent["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("mode", ["chat", "anthropic"])
def test_deltas_are_sent_as_they_arrive(make_stack, mode):
    """Each upstream delta reaches the client before the upstream sends the next one."""
    stack = stack_for(make_stack, mode)
    pace = 0.5
    stack.fake.push(Turn(text="one two three four", pace=pace))
    arrived: list[tuple[float, str]] = []
    parser = sse.Parser()
    start = time.monotonic()
    with httpx.stream("POST", stack.url + PATH, json=STREAM, headers=AUTH, timeout=10) as r:
        for chunk in r.iter_raw():
            for _, data in parser.feed(chunk):
                event = json.loads(data)
                if event["type"] == "response.output_text.delta":
                    arrived.append((time.monotonic() - start, event["delta"]))
    assert [d for _, d in arrived] == ["one ", "two ", "three ", "four"]
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(arrived)]
    assert all(gap > pace / 3 for gap in gaps), gaps  # not held back and sent together


@pytest.mark.parametrize("mode", ["chat", "anthropic"])
def test_tool_call_stream_events(make_stack, mode):
    stack = stack_for(make_stack, mode)
    stack.fake.push(
        Turn(
            text="Checking.",
            tool_calls=[("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Oslo"})],
        )
    )
    r, events = stream(stack, {**STREAM, "tools": [WEATHER]})
    check_framing(events)
    kinds = [data["type"] for _, data in events]
    assert kinds[-2:] == ["response.completed", "reef.receipt"]
    added = of_type(events, "response.output_item.added")
    assert [(a["output_index"], a["item"]["type"]) for a in added] == [
        (0, "message"),
        (1, "function_call"),
        (2, "function_call"),
    ]
    done = {d["output_index"]: d["item"] for d in of_type(events, "response.output_item.done")}
    for index, city in ((1, "Paris"), (2, "Oslo")):
        item = added[index]["item"]
        assert item["name"] == "get_weather" and item["call_id"]
        deltas = [
            d["delta"]
            for d in of_type(events, "response.function_call_arguments.delta")
            if d["output_index"] == index
        ]
        [args_done] = [
            d
            for d in of_type(events, "response.function_call_arguments.done")
            if d["output_index"] == index
        ]
        assert json.loads("".join(deltas)) == {"city": city}
        assert json.loads(args_done["arguments"]) == {"city": city}
        assert args_done["item_id"] == item["id"]
        assert done[index]["type"] == "function_call" and done[index]["status"] == "completed"
        assert done[index]["call_id"] == item["call_id"] and done[index]["id"] == item["id"]
        assert json.loads(done[index]["arguments"]) == {"city": city}
    # every item is closed before the next one opens
    opened = [i for i, k in enumerate(kinds) if k == "response.output_item.added"]
    closed = [i for i, k in enumerate(kinds) if k == "response.output_item.done"]
    assert all(c < o for c, o in zip(closed, opened[1:], strict=False))
    final = of_type(events, "response.completed")[0]["response"]
    assert [o["type"] for o in final["output"]] == ["message", "function_call", "function_call"]
    assert final["output"][1:] == [done[1], done[2]]
    check_receipt(r, events)


def test_custom_tool_call_stream(make_stack):
    stack = stack_for(make_stack, "chat")
    stack.fake.push(Turn(text="", tool_calls=[("apply_patch", {"input": "*** Begin Patch"})]))
    r, events = stream(stack, {**STREAM, "tools": [PATCH]})
    check_framing(events)
    [done] = of_type(events, "response.output_item.done")
    item = done["item"]
    assert item["type"] == "custom_tool_call" and item["name"] == "apply_patch"
    assert item["input"] == "*** Begin Patch" and item["call_id"].startswith("call_0_")
    final = of_type(events, "response.completed")[0]["response"]
    assert final["output"] == [item]
    check_receipt(r, events)


def test_length_stop_stream_is_incomplete(make_stack):
    stack = stack_for(make_stack, "chat")
    stack.fake.push(Turn(text="cut sh", finish="length"))
    r, events = stream(stack, {**STREAM, "max_output_tokens": 2})
    check_framing(events)
    end = events[-2][1]
    assert end["type"] in ("response.completed", "response.incomplete")
    assert end["response"]["status"] == "incomplete"
    assert end["response"]["incomplete_details"]["reason"] == "max_output_tokens"
    check_receipt(r, events)


def test_responses_upstream_stream_is_relayed_untouched(make_stack):
    stack = stack_for(make_stack, "responses")
    stack.fake.push(Turn(text="alpha beta", tool_calls=[("get_weather", {"city": "Rome"})]))
    body = {**STREAM, "tools": [WEATHER], "previous_response_id": "resp_up_1"}
    with httpx.stream("POST", stack.url + PATH, json=body, headers=AUTH, timeout=10) as r:
        raw = r.read()
    assert r.status_code == 200
    assert stack.fake.log[-1].body == body
    upstream = stack.fake.answers[-1]
    assert raw.startswith(upstream)  # every upstream byte, in order, unchanged
    tail = list(sse.iter_events(raw[len(upstream) :]))
    assert len(tail) == 1 and tail[0][0] == "reef.receipt"
    events = [(e, json.loads(d)) for e, d in sse.iter_events(raw)]
    check_framing(events)  # the receipt continues the upstream's sequence numbers
    check_receipt(r, events)


@pytest.mark.parametrize("mode", list(MODES))
def test_record_of_a_stream(make_stack, mode):
    stack = stack_for(make_stack, mode)
    stack.fake.push(Turn(text="streamed and kept", usage=(31, 4)))
    headers = {**AUTH, "x-reef-scenario": "shop", "x-reef-session": "sess-7"}
    r, events = stream(stack, STREAM, headers)
    rec = record(stack, check_receipt(r, events))
    assert rec.client_dialect == "responses" and rec.scenario == "shop"
    assert rec.session_id == "sess-7" and rec.status == 200 and rec.error is None
    assert rec.stream and rec.state == "complete"
    assert rec.input_tokens == 31 and rec.output_tokens == 4
    assert output_text(rec.response) == "streamed and kept"
    assert rec.response["id"] == events[0][1]["response"]["id"]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize(
    ("turn", "status"), [(Turn(drop_after=4), 502), (Turn(stall_mid=STALL), 504)]
)
def test_upstream_failure_mid_stream(make_stack, mode, turn, status):
    stack = stack_for(make_stack, mode, read_timeout=SHORT_READ_TIMEOUT)
    stack.fake.push(turn)
    r, events = stream(stack, STREAM)
    check_framing(events)
    failure = events[-2][1]
    assert failure["type"] in ("response.failed", "error"), [e for e, _ in events]
    if failure["type"] == "response.failed":
        assert failure["response"]["status"] == "failed"
        assert failure["response"]["error"]["message"]
    else:
        assert failure.get("message") or failure.get("error")
    assert not of_type(events, "response.completed")
    receipt = check_receipt(r, events)
    rec = record(stack, receipt)
    assert rec.status == status and rec.error and rec.stream
    assert rec.client_dialect == "responses"
    # the server is fine afterwards
    assert stack.fake.log and stream(stack, STREAM)[1][-1][1]["type"] == "reef.receipt"


@pytest.mark.parametrize("mode", list(MODES))
def test_error_before_the_stream_is_a_json_error(make_stack, mode):
    stack = stack_for(make_stack, mode)
    stack.fake.push(Turn(status=429, error="slow down"))
    r = httpx.post(stack.url + PATH, json=STREAM, headers=AUTH, timeout=10)
    assert r.status_code == 429 and r.json()["error"]["message"] == "slow down"
    assert record(stack, r.headers[RECORD_HEADER]).status == 429


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("turn", [Turn(), Turn(drop_after=4)], ids=["whole", "dropped"])
def test_added_events_continue_the_sequence(make_stack, mode, turn):
    """The events Reef adds (the receipt; an ``error`` for a failed upstream) carry the
    next ``sequence_number`` like every other event of the stream."""
    stack = stack_for(make_stack, mode)
    stack.fake.push(turn)
    _, events = stream(stack, STREAM)
    numbers = [data.get("sequence_number") for _, data in events]
    assert numbers == list(range(len(events))), [
        (e, n) for (e, _), n in zip(events, numbers, strict=True)
    ]


@pytest.mark.parametrize("mode", ["chat", "responses"])
def test_receipts_name_the_served_release(make_stack, mode):
    stack = stack_for(make_stack, mode, release_cache_seconds=0)
    scenarios.create("shop").chain().publish({"rules/a.md": "be kind\n"})
    headers = {**AUTH, "x-reef-scenario": "shop"}
    r = httpx.post(stack.url + PATH, json={"model": "m", "input": "hi"}, headers=headers)
    assert r.status_code == 200 and r.headers[RELEASE_HEADER] == "1"
    assert record(stack, r.headers[RECORD_HEADER]).release_id == 1
    r, events = stream(stack, STREAM, headers)
    assert r.headers[RELEASE_HEADER] == "1"
    assert (
        events[-1][1]["release_id"] == 1 and events[-1][1]["record_id"] == r.headers[RECORD_HEADER]
    )
    assert record(stack, r.headers[RECORD_HEADER]).release_id == 1

"""``previous_response_id`` on `POST /v1/responses`: for upstreams that keep no state
(chat, Anthropic) Reef keeps the conversation, per scenario, from the moment an answer is
returned and across a restart; ``store: false`` answers are not kept; a Responses
upstream gets the id untouched (it keeps its own state)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.fakes.upstream import Turn
from tests.server.test_responses_api import (
    AUTH,
    PATH,
    WEATHER,
    output_text,
    post,
    stack_for,
    text_of,
)
from tests.server.test_responses_stream import stream

STATELESS = ["chat", "anthropic"]


def conversation(sent: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of each message an upstream got, chat or Anthropic, system first."""
    out: list[tuple[str, str]] = []
    if sent.get("system"):
        out.append(("system", text_of(sent["system"])))
    for m in sent["messages"]:
        out.append((m["role"], text_of(m.get("content"))))
    return out


def turn(stack, headers: dict[str, str] | None = None, **body: Any) -> dict[str, Any]:
    r = post(stack, {"model": "m", **body}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def assert_not_found(r: httpx.Response) -> None:
    assert r.status_code == 404, r.text
    error = r.json()["error"]
    assert error["code"] == "previous_response_not_found"
    assert error["param"] == "previous_response_id" and error["message"]
    assert "type" in error


@pytest.mark.parametrize("mode", STATELESS)
def test_three_turns_carry_the_conversation(make_stack, mode):
    stack = stack_for(make_stack, mode)
    stack.fake.push(Turn(text="A1"), Turn(text="A2"), Turn(text="A3"))
    first = turn(stack, instructions="be brief", input="one")
    assert conversation(stack.fake.log[-1].body) == [("system", "be brief"), ("user", "one")]
    # at once: no wait for the recorder
    second = turn(stack, input="two", previous_response_id=first["id"])
    assert second["previous_response_id"] == first["id"]
    third = turn(
        stack,
        instructions="now in French",
        input=[{"role": "user", "content": [{"type": "input_text", "text": "three"}]}],
        previous_response_id=second["id"],
    )
    assert output_text(third) == "A3" and third["previous_response_id"] == second["id"]
    # turn 1's instructions are not carried over (as the API does); turn 3's are its own
    assert conversation(stack.fake.log[-1].body) == [
        ("system", "now in French"),
        ("user", "one"),
        ("assistant", "A1"),
        ("user", "two"),
        ("assistant", "A2"),
        ("user", "three"),
    ]
    # a branch from turn 1 sees turn 1 only
    turn(stack, input="other", previous_response_id=first["id"])
    assert conversation(stack.fake.log[-1].body) == [
        ("user", "one"),
        ("assistant", "A1"),
        ("user", "other"),
    ]


@pytest.mark.parametrize("mode", STATELESS)
def test_a_tool_call_round_trip(make_stack, mode):
    stack = stack_for(make_stack, mode)
    stack.fake.push(
        Turn(text="", tool_calls=[("get_weather", {"city": "Paris"})]), Turn(text="Sunny")
    )
    asked = turn(stack, input="weather?", tools=[WEATHER])
    [call] = asked["output"]
    assert call["type"] == "function_call"
    answer = turn(
        stack,
        tools=[WEATHER],
        previous_response_id=asked["id"],
        input=[{"type": "function_call_output", "call_id": call["call_id"], "output": "25C"}],
    )
    assert output_text(answer) == "Sunny"
    sent = stack.fake.log[-1].body
    if mode == "chat":
        user, assistant, tool = sent["messages"]
        assert user == {"role": "user", "content": "weather?"}
        [chat_call] = assistant["tool_calls"]
        assert chat_call["id"] == call["call_id"]
        assert json.loads(chat_call["function"]["arguments"]) == {"city": "Paris"}
        assert tool == {"role": "tool", "tool_call_id": call["call_id"], "content": "25C"}
    else:
        user, assistant, result = sent["messages"]
        use = next(b for b in assistant["content"] if b["type"] == "tool_use")
        assert use["id"] == call["call_id"] and use["input"] == {"city": "Paris"}
        block = next(b for b in result["content"] if b["type"] == "tool_result")
        assert block["tool_use_id"] == call["call_id"] and text_of(block["content"]) == "25C"


@pytest.mark.parametrize("mode", STATELESS)
def test_a_streamed_answer_is_continued_at_once(make_stack, mode):
    stack = stack_for(make_stack, mode)
    stack.fake.push(Turn(text="streamed one"), Turn(text="x"))
    _, events = stream(stack, {"model": "m", "input": "first", "stream": True})
    first = events[0][1]["response"]["id"]
    turn(stack, input="second", previous_response_id=first)
    assert conversation(stack.fake.log[-1].body) == [
        ("user", "first"),
        ("assistant", "streamed one"),
        ("user", "second"),
    ]


@pytest.mark.parametrize("mode", STATELESS)
def test_unknown_other_scenario_and_unstored_ids_are_404(make_stack, mode):
    stack = stack_for(make_stack, mode)
    assert_not_found(post(stack, {"model": "m", "input": "x", "previous_response_id": "resp_0"}))
    assert_not_found(post(stack, {"model": "m", "input": "x", "previous_response_id": "nope"}))
    unknown = {"model": "m", "input": "x", "stream": True, "previous_response_id": "resp_1"}
    assert_not_found(post(stack, unknown))  # a stream request is refused the same way
    shop = {**AUTH, "x-reef-scenario": "shop"}
    kept = turn(stack, shop, input="in shop")
    assert_not_found(post(stack, {"model": "m", "input": "x", "previous_response_id": kept["id"]}))
    other = {**AUTH, "x-reef-scenario": "other"}
    r = post(stack, {"model": "m", "input": "x", "previous_response_id": kept["id"]}, other)
    assert_not_found(r)
    unstored = turn(stack, shop, input="forget me", store=False)
    r = post(stack, {"model": "m", "input": "x", "previous_response_id": unstored["id"]}, shop)
    assert_not_found(r)
    _, events = stream(stack, {"model": "m", "input": "y", "stream": True, "store": False}, shop)
    r = post(
        stack,
        {"model": "m", "input": "x", "previous_response_id": events[0][1]["response"]["id"]},
        shop,
    )
    assert_not_found(r)
    calls = len(stack.fake.log)
    turn(stack, shop, input="fine", previous_response_id=kept["id"])
    assert len(stack.fake.log) == calls + 1  # a refused one never reached the upstream
    # still refused once everything is on disk (not only the in-memory turns)
    stack.flush()
    r = post(stack, {"model": "m", "input": "x", "previous_response_id": unstored["id"]}, shop)
    assert_not_found(r)
    r = post(stack, {"model": "m", "input": "x", "previous_response_id": kept["id"]}, other)
    assert_not_found(r)


@pytest.mark.parametrize("mode", STATELESS)
def test_a_conversation_survives_a_restart(make_stack, mode):
    stack = stack_for(make_stack, mode)
    stack.fake.push(Turn(text="A1"), Turn(text="A2"))
    shop = {**AUTH, "x-reef-scenario": "shop"}
    first = turn(stack, shop, input="one")
    second = turn(stack, shop, input="two", previous_response_id=first["id"])
    unstored = turn(stack, shop, input="gone", store=False)
    stack.reef.stop()  # a clean stop: the recorder flushes
    again = stack_for(make_stack, mode, fake=stack.fake)  # a new app on the same REEF_HOME
    r = post(again, {"model": "m", "input": "three", "previous_response_id": second["id"]}, shop)
    assert r.status_code == 200, r.text
    assert conversation(stack.fake.log[-1].body) == [
        ("user", "one"),
        ("assistant", "A1"),
        ("user", "two"),
        ("assistant", "A2"),
        ("user", "three"),
    ]
    r = post(again, {"model": "m", "input": "x", "previous_response_id": unstored["id"]}, shop)
    assert_not_found(r)
    r = post(again, {"model": "m", "input": "x", "previous_response_id": second["id"]})
    assert_not_found(r)  # the default scenario does not see shop's turns


def test_a_responses_upstream_gets_previous_response_id_untouched(make_stack):
    stack = stack_for(make_stack, "responses")
    body = {"model": "m", "input": "two", "previous_response_id": "resp_only_upstream_knows"}
    r = post(stack, body)
    assert r.status_code == 200  # Reef does not look it up
    assert stack.fake.log[-1].path == PATH and stack.fake.log[-1].body == body
    r = post(stack, {"model": "m", "input": "x", "previous_response_id": r.json()["id"]})
    assert r.status_code == 200
    assert stack.fake.log[-1].body["input"] == "x"  # nothing prepended


def test_memory_keeps_recent_turns_within_its_bounds() -> None:
    """The in-memory turns are bounded by count and by bytes; what falls out is read from
    the record store (none here, so it is gone)."""
    import asyncio

    from reef_cli.server.conversations import Conversations, Turn, weigh

    item = {"type": "message", "role": "user", "content": "hi"}

    def turn(previous: str | None) -> Turn:
        return Turn("s", {"input": [item], "previous_response_id": previous}, {"output": []})

    one = weigh(turn("resp_0").request) + weigh(turn("resp_0").response)
    memory = Conversations(None, size=3, max_bytes=one * 5 // 2)
    for n in range(4):
        memory.remember(f"resp_{n}", turn(f"resp_{n - 1}" if n else None))
    # 4 turns > 2.5 turns' bytes: only the last two are kept
    assert asyncio.run(memory.history("s", "resp_3")) is None  # resp_1 fell out
    assert asyncio.run(memory.history("s", "resp_0")) is None
    memory.remember("resp_9", turn(None))
    assert asyncio.run(memory.history("s", "resp_9")) == [item]
    assert asyncio.run(memory.history("other", "resp_9")) is None  # scoped to the scenario

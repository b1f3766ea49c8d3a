"""The official ``openai`` SDK's Responses API, unmodified, through `reef serve`: a chat
upstream (translated), a Responses upstream (relayed) and an Anthropic one; whole and
streamed answers, the stream helper, tool calls, ``previous_response_id``, receipts."""

from __future__ import annotations

import json

import openai
import pytest

from reef_cli.server.receipts import RECORD_HEADER, RELEASE_HEADER
from tests.fakes.upstream import Turn
from tests.server.conftest import TOKEN
from tests.server.test_responses_api import WEATHER, record, stack_for, text_of
from tests.server.test_responses_state import conversation

MODES = ["chat", "responses", "anthropic"]


def client_for(stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.url + "/v1", api_key=TOKEN, max_retries=0, timeout=20)


@pytest.mark.parametrize("mode", MODES)
def test_create_stream_and_the_stream_helper(make_stack, mode):
    stack = stack_for(make_stack, mode)
    client = client_for(stack)

    raw = client.responses.with_raw_response.create(
        model="gpt-5",
        instructions="be brief",
        input="hi",
        extra_headers={"x-reef-scenario": "sdk-shop", "x-reef-session": "sdk-1"},
    )
    response = raw.parse()
    assert response.output_text == "Hello from the fake model."
    assert response.status == "completed"
    assert response.usage is not None and response.usage.output_tokens == 7
    assert raw.headers[RELEASE_HEADER] == ""
    rec = record(stack, raw.headers[RECORD_HEADER])
    assert rec.client_dialect == "responses" and rec.status == 200
    assert rec.scenario == "sdk-shop" and rec.session_id == "sdk-1"
    assert TOKEN not in json.dumps(stack.fake.log[-1].headers)

    # create(stream=True), iterated to the end: the receipt event does not trip the SDK
    stack.fake.push(Turn(text="one two three"))
    raw_stream = client.responses.with_raw_response.create(
        model="gpt-5", input="count", stream=True
    )
    events = list(raw_stream.parse())
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "one two three" and len(deltas) == 3
    completed = [e for e in events if e.type == "response.completed"]
    assert len(completed) == 1 and completed[0].response.output_text == "one two three"
    assert events[-1].type == "reef.receipt"
    receipt = raw_stream.headers[RECORD_HEADER]
    assert getattr(events[-1], "record_id", None) == receipt
    assert record(stack, receipt).stream

    # the stream helper: accumulates, and gives the final response
    stack.fake.push(Turn(text="alpha beta"))
    with client.responses.stream(model="gpt-5", input="go") as s:
        texts = [e.delta for e in s if e.type == "response.output_text.delta"]
        final = s.get_final_response()
    assert "".join(texts) == "alpha beta" and final.output_text == "alpha beta"
    assert final.usage is not None and final.usage.input_tokens == 11


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "stream"])
def test_tool_round_trip(make_stack, mode, streamed):
    stack = stack_for(make_stack, mode)
    client = client_for(stack)
    stack.fake.push(
        Turn(text="", tool_calls=[("get_weather", {"city": "Paris"})]), Turn(text="Sunny.")
    )
    asked: openai.types.responses.Response
    if streamed:
        with client.responses.stream(model="gpt-5", input="weather?", tools=[WEATHER]) as s:
            for _ in s:
                pass
            asked = s.get_final_response()
    else:
        asked = client.responses.create(model="gpt-5", input="weather?", tools=[WEATHER])
    [call] = [o for o in asked.output if o.type == "function_call"]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    answer = client.responses.create(
        model="gpt-5",
        tools=[WEATHER],
        previous_response_id=asked.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "25C"}],
    )
    assert answer.output_text == "Sunny."
    sent = stack.fake.log[-1].body
    if mode == "responses":
        assert sent["previous_response_id"] == asked.id  # the upstream keeps the state
        assert sent["input"][0]["call_id"] == call.call_id
    elif mode == "chat":
        assert sent["messages"][1]["tool_calls"][0]["id"] == call.call_id
        assert sent["messages"][2] == {
            "role": "tool",
            "tool_call_id": call.call_id,
            "content": "25C",
        }
    else:
        result = next(b for b in sent["messages"][2]["content"] if b["type"] == "tool_result")
        assert result["tool_use_id"] == call.call_id and text_of(result["content"]) == "25C"


@pytest.mark.parametrize("mode", MODES)
def test_previous_response_id_across_three_turns(make_stack, mode):
    stack = stack_for(make_stack, mode)
    client = client_for(stack)
    stack.fake.push(Turn(text="A1"), Turn(text="A2"), Turn(text="A3"))
    scenario = {"x-reef-scenario": "sdk-chain"}
    first = client.responses.create(
        model="gpt-5", instructions="be brief", input="one", extra_headers=scenario
    )
    with client.responses.stream(
        model="gpt-5", input="two", previous_response_id=first.id, extra_headers=scenario
    ) as s:
        second = s.get_final_response()
    third = client.responses.create(
        model="gpt-5", input="three", previous_response_id=second.id, extra_headers=scenario
    )
    assert [first.output_text, second.output_text, third.output_text] == ["A1", "A2", "A3"]
    sent = stack.fake.log[-1].body
    if mode == "responses":
        assert sent["previous_response_id"] == second.id and sent["input"] == "three"
    else:
        assert conversation(sent) == [
            ("user", "one"),
            ("assistant", "A1"),
            ("user", "two"),
            ("assistant", "A2"),
            ("user", "three"),
        ]
        with pytest.raises(openai.NotFoundError) as caught:
            client.responses.create(model="gpt-5", input="x", previous_response_id=second.id)
        assert caught.value.code == "previous_response_not_found"  # another scenario's id
    stack.flush()
    assert {r.scenario for r in stack.store().list(limit=None)} == {"sdk-chain"}


def test_errors_reach_the_sdk_as_its_exceptions(make_stack):
    stack = stack_for(make_stack, "chat")
    client = client_for(stack)
    stack.fake.push(Turn(status=429, error="slow down"))
    with pytest.raises(openai.RateLimitError, match="slow down"):
        client.responses.create(model="gpt-5", input="hi")
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=stack.url + "/v1", api_key="wrong", max_retries=0).responses.create(
            model="gpt-5", input="hi"
        )
    # a stream the upstream drops: the SDK sees response.failed and no final response
    stack.fake.push(Turn(drop_after=4))
    with client.responses.stream(model="gpt-5", input="hi") as s:
        events = list(s)
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            s.get_final_response()
    kinds = [e.type for e in events]
    assert "response.completed" not in kinds and kinds[-1] == "reef.receipt"
    failed = [e for e in events if e.type == "response.failed"]
    errors = [e for e in events if e.type == "error"]
    assert failed or errors, kinds
    if failed:
        assert failed[0].response.status == "failed" and failed[0].response.error.message
    if errors:
        assert "dropped" in errors[0].message

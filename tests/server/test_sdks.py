"""The official OpenAI and Anthropic SDKs, unmodified, through `reef serve`, against both
upstream dialects: chat, streaming and tool calls; one complete record per call."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from reef_cli.server.receipts import RECORD_HEADER, RELEASE_HEADER
from tests.fakes.upstream import Turn
from tests.server.conftest import TOKEN

WEATHER_TOOL_O = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
WEATHER_TOOL_A = {
    "name": "get_weather",
    "description": "weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def _record(stack, receipt):
    stack.flush()
    rec = stack.store().get(receipt)
    assert rec.status == 200 and rec.error is None
    assert rec.request is not None and rec.response is not None
    return rec


@pytest.mark.parametrize("upstream", ["openai", "anthropic"])
def test_openai_sdk(make_stack, upstream):
    stack = make_stack(upstream)
    client = openai.OpenAI(base_url=stack.url + "/v1", api_key=TOKEN, max_retries=0)

    # plain chat
    raw = client.chat.completions.with_raw_response.create(
        model="m",
        messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == "Hello from the fake model."
    receipt = raw.headers[RECORD_HEADER]
    assert raw.headers[RELEASE_HEADER] == ""  # empty chain: no release served yet
    rec = _record(stack, receipt)
    assert rec.client_dialect == "openai" and rec.upstream_dialect == upstream
    assert rec.response["choices"][0]["message"]["content"] == "Hello from the fake model."
    assert rec.input_tokens == 11 and rec.output_tokens == 7
    sent = stack.fake.log[-1]
    if upstream == "anthropic":
        assert sent.path == "/v1/messages" and sent.body["system"] == "be brief"
        assert sent.headers["anthropic-version"]
    assert TOKEN not in json.dumps(sent.headers)  # the Reef token never goes upstream

    # streaming: deltas arrive, the receipt chunk is ignored by the SDK
    stack.fake.push(Turn(text="one two three four"))
    with client.chat.completions.with_streaming_response.create(
        model="m",
        messages=[{"role": "user", "content": "count"}],
        stream=True,
        stream_options={"include_usage": True},
    ) as resp:
        receipt = resp.headers[RECORD_HEADER]
        chunks = list(resp.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "one two three four"
    reef_chunks = [c for c in chunks if getattr(c, "reef", None)]
    assert len(reef_chunks) == 1 and reef_chunks[0].reef["record_id"] == receipt
    rec = _record(stack, receipt)
    assert rec.stream and rec.response["choices"][0]["message"]["content"] == text
    assert rec.output_tokens == 7

    # tool call, non-streaming and streaming
    for stream in (False, True):
        stack.fake.push(Turn(text="", tool_calls=[("get_weather", {"city": "Paris"})]))
        messages = [{"role": "user", "content": "weather?"}]
        if stream:
            s = client.chat.completions.stream(model="m", messages=messages, tools=[WEATHER_TOOL_O])
            with s as events:
                for _ in events:
                    pass
                final = events.get_final_completion()
        else:
            final = client.chat.completions.create(
                model="m", messages=messages, tools=[WEATHER_TOOL_O]
            )
        call = final.choices[0].message.tool_calls[0]
        assert call.function.name == "get_weather"
        assert json.loads(call.function.arguments) == {"city": "Paris"}
        assert final.choices[0].finish_reason == "tool_calls"

    # the tool result goes back in the other dialect's shape
    stack.fake.push(Turn(text="Sunny."))
    client.chat.completions.create(
        model="m",
        tools=[WEATHER_TOOL_O],
        messages=[
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ],
    )
    sent = stack.fake.log[-1].body
    if upstream == "anthropic":
        assert sent["messages"][1]["content"][0] == {
            "type": "tool_use",
            "id": "call_1",
            "name": "get_weather",
            "input": {"city": "Paris"},
        }
        assert sent["messages"][2]["content"][0]["type"] == "tool_result"
    stack.flush()
    assert stack.store().count() == 5  # exactly one record per call


@pytest.mark.parametrize("upstream", ["openai", "anthropic"])
def test_anthropic_sdk(make_stack, upstream):
    stack = make_stack(upstream)
    client = anthropic.Anthropic(base_url=stack.url, api_key=TOKEN, max_retries=0)

    raw = client.messages.with_raw_response.create(
        model="m",
        max_tokens=100,
        system=[{"type": "text", "text": "be brief"}],
        messages=[{"role": "user", "content": "hi"}],
    )
    msg = raw.parse()
    assert msg.content[0].text == "Hello from the fake model."
    assert msg.stop_reason == "end_turn" and msg.usage.input_tokens == 11
    rec = _record(stack, raw.headers[RECORD_HEADER])
    assert rec.client_dialect == "anthropic" and rec.upstream_dialect == upstream
    if upstream == "openai":
        sent = stack.fake.log[-1]
        assert sent.path == "/v1/chat/completions"
        assert sent.body["messages"][0] == {"role": "system", "content": "be brief"}
        assert "x-api-key" not in sent.headers and "authorization" not in sent.headers

    # streaming with the SDK's helper (it accumulates; the receipt ping is skipped)
    stack.fake.push(Turn(text="alpha beta gamma"))
    with client.messages.stream(
        model="m", max_tokens=100, messages=[{"role": "user", "content": "go"}]
    ) as stream:
        receipt = stream.response.headers[RECORD_HEADER]
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "alpha beta gamma" and final.content[0].text == text
    rec = _record(stack, receipt)
    assert rec.stream and rec.response["content"][0]["text"] == text
    assert rec.output_tokens == 7

    # tool use, streaming and not, with a mid-conversation system message (Claude Code)
    for stream_mode in (False, True):
        stack.fake.push(Turn(text="Let me check.", tool_calls=[("get_weather", {"city": "Oslo"})]))
        kwargs = dict(
            model="m",
            max_tokens=100,
            tools=[WEATHER_TOOL_A],
            messages=[{"role": "user", "content": "weather?"}],
        )
        if stream_mode:
            with client.messages.stream(**kwargs) as s:
                for _ in s:
                    pass
                final = s.get_final_message()
        else:
            final = client.messages.create(**kwargs)
        tool = next(b for b in final.content if b.type == "tool_use")
        assert tool.name == "get_weather" and tool.input == {"city": "Oslo"}
        assert final.stop_reason == "tool_use"
        assert final.content[0].type == "text" and final.content[0].text == "Let me check."

    stack.fake.push(Turn(text="Cold."))
    client.messages.create(
        model="m",
        max_tokens=100,
        tools=[WEATHER_TOOL_A],
        messages=[
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Oslo"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "-5C"},
                    {"type": "text", "text": "and tomorrow?"},
                ],
            },
        ],
    )
    if upstream == "openai":
        sent = stack.fake.log[-1].body["messages"]
        assert sent[1]["tool_calls"][0]["function"]["name"] == "get_weather"
        assert sent[2] == {"role": "tool", "tool_call_id": "toolu_1", "content": "-5C"}
        assert sent[3] == {"role": "user", "content": "and tomorrow?"}
    stack.flush()
    assert stack.store().count() == 5

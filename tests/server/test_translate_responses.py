"""The Responses <-> chat translation as pure functions (the route's tests are in
test_responses_api.py): item mapping, custom tools, stop states and the stream's events."""

from __future__ import annotations

import json
from typing import Any

from reef_cli.server import assemble, sse
from reef_cli.server import translate_responses as tr
from reef_cli.server.responses_stream import Chained, ChatToResponses
from reef_cli.server.translate_stream import AnthropicToOpenAI

PATCH = {"type": "custom", "name": "apply_patch", "description": "Apply a patch."}
SHELL = {
    "type": "function",
    "name": "shell",
    "description": "Run a command.",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
}


def test_items_become_chat_messages_in_order() -> None:
    body = {
        "model": "gpt-x",
        "instructions": "Be terse.",
        "input": [
            {"type": "message", "role": "developer", "content": "house rules"},
            {"role": "user", "content": [{"type": "input_text", "text": "list files"}]},
            {"type": "reasoning", "summary": []},
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "shell",
                "arguments": '{"cmd":"ls"}',
            },
            {
                "type": "function_call",
                "call_id": "c2",
                "name": "shell",
                "arguments": '{"cmd":"pwd"}',
            },
            {"type": "function_call_output", "call_id": "c1", "output": "a.py"},
            {
                "type": "function_call_output",
                "call_id": "c2",
                "output": [{"type": "input_text", "text": "/w"}],
            },
            {"type": "web_search_call", "id": "ws_1"},
        ],
        "tools": [SHELL, {"type": "web_search"}],
        "tool_choice": {"type": "function", "name": "shell"},
        "max_output_tokens": 64,
        "stream": True,
    }
    chat = tr.to_chat(body, [], model="served")
    assert chat["model"] == "served"
    assert [m["role"] for m in chat["messages"]] == [
        "system",
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
    ]
    assert chat["messages"][0]["content"] == "Be terse."
    assert chat["messages"][2]["content"] == "list files"
    calls = chat["messages"][3]["tool_calls"]
    assert [c["id"] for c in calls] == ["c1", "c2"]  # consecutive calls: one assistant message
    assert chat["messages"][5] == {"role": "tool", "tool_call_id": "c2", "content": "/w"}
    assert [t["function"]["name"] for t in chat["tools"]] == ["shell"]  # web_search dropped
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "shell"}}
    assert chat["max_tokens"] == 64
    assert chat["stream_options"] == {"include_usage": True}


def test_history_comes_before_input_and_instructions_are_not_carried() -> None:
    history = [
        {"type": "message", "role": "user", "content": "one"},
        tr.message_item("first answer"),
    ]
    chat = tr.to_chat({"model": "m", "input": "two"}, history)
    assert [(m["role"], m["content"]) for m in chat["messages"]] == [
        ("user", "one"),
        ("assistant", "first answer"),
        ("user", "two"),
    ]


def test_custom_tools_round_trip_as_custom_tool_calls() -> None:
    body = {"model": "m", "input": "patch it", "tools": [PATCH]}
    chat = tr.to_chat(body, [])
    [tool] = chat["tools"]
    assert tool["function"]["parameters"]["required"] == ["input"]
    patch = "*** Begin Patch\n*** End Patch\n"
    answer = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_9",
                            "type": "function",
                            "function": {
                                "name": "apply_patch",
                                "arguments": json.dumps({"input": patch}),
                            },
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }
    response = tr.from_chat(answer, body, "resp_1")
    [item] = response["output"]
    assert item["type"] == "custom_tool_call" and item["input"] == patch
    assert item["call_id"] == "call_9"
    # the next turn sends the call and its output back: chat sees the same call again
    follow = tr.items_to_messages(
        [item, {"type": "custom_tool_call_output", "call_id": "call_9", "output": "Done"}]
    )
    assert json.loads(follow[0]["tool_calls"][0]["function"]["arguments"]) == {"input": patch}
    assert follow[1] == {"role": "tool", "tool_call_id": "call_9", "content": "Done"}


def test_a_length_stop_is_incomplete_and_usage_is_renamed() -> None:
    answer = {
        "choices": [
            {"message": {"role": "assistant", "content": "cut"}, "finish_reason": "length"}
        ],
        "usage": {
            "prompt_tokens": 5,
            "completion_tokens": 3,
            "total_tokens": 8,
            "prompt_tokens_details": {"cached_tokens": 2},
        },
    }
    response = tr.from_chat(answer, {"model": "m", "input": "x"}, "resp_2")
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert response["usage"]["input_tokens"] == 5
    assert response["usage"]["input_tokens_details"] == {"cached_tokens": 2}
    assert response["model"] == "m" and response["id"] == "resp_2"


def _chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> str:
    body: dict[str, Any] = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        body = {"choices": [], "usage": usage}
    return json.dumps(body)


def _events(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(data) for _event, data in sse.iter_events(raw)]


def test_stream_events_open_and_close_each_item_in_order() -> None:
    body = {"model": "m", "input": "x", "tools": [SHELL]}
    translator = ChatToResponses(body, "resp_3")
    raw = translator.feed(None, _chunk({"role": "assistant", "content": ""}))
    raw += translator.feed(None, _chunk({"content": "Let me "}))
    raw += translator.feed(None, _chunk({"content": "look."}))
    head = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "shell", "arguments": ""},
    }
    raw += translator.feed(None, _chunk({"tool_calls": [head]}))
    raw += translator.feed(
        None, _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"cmd":'}}]})
    )
    raw += translator.feed(
        None, _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"ls"}'}}]})
    )
    raw += translator.feed(None, _chunk({}, "tool_calls"))
    raw += translator.feed(None, _chunk({}, usage={"prompt_tokens": 4, "completion_tokens": 2}))
    raw += translator.feed(None, "[DONE]")
    raw += translator.finish(b"")
    events = _events(raw)
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    final = events[-1]["response"]
    assert [item["type"] for item in final["output"]] == ["message", "function_call"]
    assert final["output"][0]["content"][0]["text"] == "Let me look."
    assert final["output"][1]["arguments"] == '{"cmd":"ls"}'
    assert final["usage"]["output_tokens"] == 2
    assert not any("_text" in item or "_arguments" in item for item in final["output"])
    # the record is assembled from the terminal event
    assert assemble.responses_stream(raw)["output"] == final["output"]


def test_a_broken_stream_fails_and_the_record_keeps_what_was_sent() -> None:
    translator = ChatToResponses({"model": "m", "input": "x"}, "resp_4")
    raw = translator.feed(None, _chunk({"content": "partial"}))
    raw += translator.finish(complete=False)
    events = _events(raw)
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["status"] == "failed"
    cut = raw[: raw.rfind(b"event: response.output_text.done")]  # a crash before the end
    assert assemble.responses_stream(cut)["output"][0]["content"][0]["text"] == "partial"


def test_anthropic_events_reach_responses_through_chat() -> None:
    translator = Chained(
        AnthropicToOpenAI("m", include_usage=True),
        ChatToResponses({"model": "m", "input": "x"}, "resp_5"),
    )
    anthropic = [
        {
            "type": "message_start",
            "message": {"id": "msg_1", "model": "claude", "usage": {"input_tokens": 3}},
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    ]
    raw = b"".join(translator.feed(e["type"], json.dumps(e)) for e in anthropic)
    raw += translator.finish(b"")
    final = _events(raw)[-1]
    assert final["type"] == "response.completed"
    assert final["response"]["output"][0]["content"][0]["text"] == "Hi"
    assert final["response"]["usage"]["input_tokens"] == 3

"""Dialect translation as pure functions (no server)."""

from __future__ import annotations

import json

from reef_cli.server import assemble, sse
from reef_cli.server import translate_request as treq
from reef_cli.server import translate_response as tresp
from reef_cli.server.translate_stream import AnthropicToOpenAI, OpenAIToAnthropic


def test_anthropic_request_to_openai():
    body = {
        "model": "claude",
        "max_tokens": 50,
        "system": [{"type": "text", "text": "rule one"}, {"type": "text", "text": "rule two"}],
        "stop_sequences": ["END"],
        "stream": True,
        "tool_choice": {"type": "any"},
        "tools": [{"name": "ls", "description": "list", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "checking"},
                    {"type": "tool_use", "id": "t1", "name": "ls", "input": {"path": "."}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "a.txt"}],
                    },
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "AAA"},
                    },
                    {"type": "text", "text": "look"},
                ],
            },
            {"role": "system", "content": "mid-conversation reminder"},
        ],
    }
    out = treq.anthropic_to_openai(body, model="local")
    assert out["model"] == "local" and out["max_tokens"] == 50 and out["stop"] == ["END"]
    assert out["stream"] is True and out["stream_options"] == {"include_usage": True}
    assert out["tool_choice"] == "required"
    assert out["tools"][0]["function"]["parameters"] == {"type": "object"}
    m = out["messages"]
    assert m[0] == {"role": "system", "content": "rule one\nrule two"}
    assert m[1] == {"role": "user", "content": "hi"}
    assert m[2]["content"] == "checking"
    assert m[2]["tool_calls"][0]["function"] == {"name": "ls", "arguments": '{"path": "."}'}
    assert m[3] == {"role": "tool", "tool_call_id": "t1", "content": "a.txt"}
    assert m[4]["content"][0]["image_url"]["url"] == "data:image/png;base64,AAA"
    assert m[4]["content"][1] == {"type": "text", "text": "look"}
    assert m[5] == {"role": "system", "content": "mid-conversation reminder"}


def test_openai_request_to_anthropic():
    body = {
        "model": "gpt",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "w", "arguments": '{"city":"Oslo"}'},
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "w", "arguments": "not json"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "cold"},
            {"role": "tool", "tool_call_id": "c2", "content": "warm"},
            {"role": "system", "content": "now summarise"},
        ],
        "stop": "END",
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "tools": [
            {"type": "function", "function": {"name": "w", "parameters": {"type": "object"}}}
        ],
    }
    out = treq.openai_to_anthropic(body)
    assert out["system"] == "be brief" and out["max_tokens"] == treq.DEFAULT_MAX_TOKENS
    assert out["stop_sequences"] == ["END"]
    assert out["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    m = out["messages"]
    assert [t["role"] for t in m] == ["user", "assistant", "user"]
    assert m[1]["content"][0] == {
        "type": "tool_use",
        "id": "c1",
        "name": "w",
        "input": {"city": "Oslo"},
    }
    assert m[1]["content"][1]["input"] == {"_raw": "not json"}
    results = m[2]["content"]
    assert [b["type"] for b in results] == ["tool_result", "tool_result", "text"]
    assert "now summarise" in results[2]["text"]


def test_whole_responses_both_ways():
    chat = {
        "id": "chatcmpl-1",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "hm",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "w", "arguments": "{}"},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }
    msg = tresp.openai_to_anthropic(chat)
    assert msg["stop_reason"] == "tool_use" and msg["usage"] == {
        "input_tokens": 5,
        "output_tokens": 3,
    }
    assert msg["content"][1] == {"type": "tool_use", "id": "c1", "name": "w", "input": {}}
    back = tresp.anthropic_to_openai(msg)
    assert back["choices"][0]["finish_reason"] == "tool_calls"
    assert back["choices"][0]["message"]["content"] == "hm"
    assert back["usage"]["total_tokens"] == 8
    assert (
        tresp.anthropic_to_openai({"content": [], "stop_reason": "max_tokens"})["choices"][0][
            "finish_reason"
        ]
        == "length"
    )


def test_errors_translate_to_the_callers_dialect():
    a = tresp.translate_error("anthropic", 429, {"error": {"message": "slow down", "type": "rate"}})
    assert a == {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    o = tresp.translate_error(
        "openai", 500, {"type": "error", "error": {"type": "api_error", "message": "boom"}}
    )
    assert o["error"]["message"] == "boom"


def _events(raw: bytes):
    return list(sse.iter_events(raw))


def test_stream_openai_to_anthropic_rebuilds_text_and_tools():
    chunks = [
        {
            "id": "chatcmpl-9",
            "model": "m",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
        },
        {"choices": [{"index": 0, "delta": {"content": "Hel"}}]},
        {"choices": [{"index": 0, "delta": {"content": "lo"}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {"index": 0, "id": "c1", "function": {"name": "w", "arguments": '{"ci'}}
                        ]
                    },
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": 'ty":"X"}'}}]},
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}},
    ]
    tr = OpenAIToAnthropic("m")
    out = b"".join(tr.feed(None, json.dumps(c)) for c in chunks) + tr.feed(None, "[DONE]")
    out += tr.finish(b'event: ping\ndata: {"type":"ping"}\n\n')
    names = [e for e, _ in _events(out)]
    assert names[0] == "message_start" and names[-1] == "message_stop" and names[-2] == "ping"
    msg = assemble.anthropic_stream(out)
    assert msg["content"][0] == {"type": "text", "text": "Hello"}
    assert msg["content"][1]["input"] == {"city": "X"}
    assert msg["stop_reason"] == "tool_use" and msg["usage"]["output_tokens"] == 2


def test_stream_anthropic_to_openai_rebuilds_text_and_tools():
    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {"id": "msg_1", "model": "m", "usage": {"input_tokens": 9}},
            },
        ),
        ("ping", {"type": "ping"}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Hi"},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": "t1", "name": "w", "input": {}},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"a":1}'},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": 3},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    tr = AnthropicToOpenAI("m", include_usage=True)
    out = b"".join(tr.feed(e, json.dumps(d)) for e, d in events) + tr.finish()
    assert out.endswith(b"data: [DONE]\n\n")
    chat = assemble.openai_stream(out)
    msg = chat["choices"][0]["message"]
    assert msg["content"] == "Hi" and msg["tool_calls"][0]["function"] == {
        "name": "w",
        "arguments": '{"a":1}',
    }
    assert chat["choices"][0]["finish_reason"] == "tool_calls"
    assert chat["usage"] == {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}


def test_splitter_holds_partial_events_only():
    s = sse.Splitter()
    assert s.feed(b"data: 1\n\ndata: 2") == b"data: 1\n\n"
    assert s.feed(b"\n") == b""
    assert s.feed(b"\ndata: 3\n\n") == b"data: 2\n\ndata: 3\n\n"
    assert s.rest() == b""

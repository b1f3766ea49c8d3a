from __future__ import annotations

import json

from reef_cli.server.embedded_adapt import adapt_request, parse_tool_call

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file",
            "parameters": {"properties": {"path": {}}},
        },
    }
]


def test_pi_style_request_is_flattened_and_rewrites_are_named() -> None:
    body = {
        "messages": [
            {"role": "system", "content": "You are pi."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "fix the bug"},
                    {"type": "image_url", "image_url": {}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "read", "arguments": '{"path": "a.py"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "print(1)"},
            {"role": "system", "content": "Mid-conversation note."},
        ],
        "tools": TOOLS,
    }
    messages, changes = adapt_request(body, 4096)
    assert all(isinstance(m["content"], str) for m in messages)
    assert {m["role"] for m in messages} <= {"system", "user", "assistant"}
    assert messages[0]["role"] == "system" and "Mid-conversation note." in messages[0]["content"]
    assert "read: Read a file" in messages[0]["content"]
    assert "fix the bug" in messages[1]["content"] and "omitted" in messages[1]["content"]
    assert messages[-1]["content"] == "Tool result: print(1)"
    assert changes == [
        "flattened-content-parts",
        "merged-mid-conversation-system",
        "tool-calls-as-text",
        "tool-results-as-text",
        "tools-in-prompt",
    ]


def test_long_history_is_trimmed_to_the_context() -> None:
    body = {"messages": [{"role": "user", "content": "x" * 5000} for _ in range(20)]}
    messages, changes = adapt_request(body, 4096)
    assert "trimmed-history" in changes
    assert sum(len(m["content"]) for m in messages) < 4096 * 3.5


def test_tool_call_is_parsed_back_only_for_known_tools() -> None:
    [call] = parse_tool_call('sure: {"tool": "read", "arguments": {"path": "a.py"}}', TOOLS)
    assert call["function"]["name"] == "read"
    assert json.loads(call["function"]["arguments"]) == {"path": "a.py"}
    assert parse_tool_call('{"tool": "rm", "arguments": {}}', TOOLS) is None
    assert parse_tool_call("no json here", TOOLS) is None
    assert parse_tool_call('{"tool": "read"}', None) is None

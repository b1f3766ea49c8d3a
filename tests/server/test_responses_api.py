"""`POST /v1/responses` (the OpenAI Responses API), whole answers: admission, the
translation to a chat-only upstream and back, an Anthropic upstream, a Responses upstream
the body is relayed to as is, provider errors, receipts and records.

Streams are in test_responses_stream.py, ``previous_response_id`` in
test_responses_state.py, the official SDK in test_responses_sdk.py."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from reef_cli.core import scenarios
from reef_cli.server.receipts import RECORD_HEADER, RELEASE_HEADER
from tests.fakes.upstream import SHORT_READ_TIMEOUT, STALL, FakeUpstream, Turn
from tests.server.conftest import LIMITED, TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}"}
PATH = "/v1/responses"
SIMPLE = {"model": "m", "input": "hi"}
WEATHER: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
PATCH: Any = {"type": "custom", "name": "apply_patch", "description": "edit files with a patch"}
# what each upstream mode is, as make_stack arguments
MODES: dict[str, dict[str, Any]] = {
    "chat": {"dialect": "openai"},
    "anthropic": {"dialect": "anthropic"},
    "responses": {"dialect": "openai", "upstream_responses": True},
}


def stack_for(make_stack, mode: str, **options: Any):
    args = dict(MODES[mode])
    return make_stack(args.pop("dialect"), **args, **options)


def post(stack, body: Any = None, headers: dict[str, str] | None = None, **kw: Any):
    h = dict(AUTH) if headers is None else headers
    return httpx.post(stack.url + PATH, json=body, headers=h, timeout=10, **kw)


def text_of(content: Any) -> str:
    """A chat or Anthropic message's content (a string or parts) as its text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))


def output_text(response: dict[str, Any]) -> str:
    """What the SDK's ``.output_text`` is: the text of the output's message items."""
    return "".join(
        part.get("text", "")
        for item in response.get("output") or []
        if item.get("type") == "message"
        for part in item.get("content") or []
        if part.get("type") == "output_text"
    )


def assert_error_shape(r: httpx.Response, status: int) -> dict[str, Any]:
    """An OpenAI-shaped error: ``{"error": {"message", "type", "param", "code"}}``."""
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/json")
    error = r.json()["error"]
    assert {"message", "type", "param", "code"} <= set(error), error
    assert isinstance(error["message"], str) and error["message"]
    return error


def record(stack, receipt: str):
    stack.flush()
    return stack.store().get(receipt)


# ---------------------------------------------------------------- admission


def test_admission_refuses_before_the_upstream(make_stack):
    stack = make_stack("openai", max_body_bytes=4096)
    url = stack.url + PATH
    json_type = {"content-type": "application/json"}
    assert "reef token" in assert_error_shape(post(stack, SIMPLE, headers={}), 401)["message"]
    assert_error_shape(post(stack, SIMPLE, headers={"authorization": "Bearer wrong"}), 401)
    limited = {"authorization": f"Bearer {LIMITED}"}
    assert_error_shape(post(stack, SIMPLE, headers=limited), 403)  # the default scenario
    error = assert_error_shape(post(stack, SIMPLE, headers={**AUTH, "x-reef-scenario": "A B"}), 400)
    assert "kebab" in error["message"]
    error = assert_error_shape(
        httpx.post(url, content=b"{not json", headers={**AUTH, **json_type}), 400
    )
    assert "not valid JSON" in error["message"]
    assert_error_shape(httpx.post(url, content=b"[1, 2]", headers={**AUTH, **json_type}), 400)
    assert_error_shape(httpx.post(url, content=b'"hi"', headers={**AUTH, **json_type}), 400)
    plain = {**AUTH, "content-type": "text/plain"}
    assert_error_shape(httpx.post(url, content=b"hello", headers=plain), 415)
    big = json.dumps({"model": "m", "input": "x" * 10000}).encode()
    assert_error_shape(httpx.post(url, content=big, headers={**AUTH, **json_type}), 413)

    def chunks():
        for _ in range(10):
            yield b"x" * 1000  # no content-length: the cap applies while reading

    assert_error_shape(httpx.post(url, content=chunks(), headers={**AUTH, **json_type}), 413)
    # a scenario token never creates its scenario: an unknown one is a 404 too
    assert_error_shape(post(stack, SIMPLE, headers={**limited, "x-reef-scenario": "team-a"}), 404)
    assert stack.fake.log == []
    scenarios.create("team-a")
    r = post(stack, SIMPLE, headers={**limited, "x-reef-scenario": "team-a"})
    assert r.status_code == 200 and output_text(r.json()) == "Hello from the fake model."
    assert len(stack.fake.log) == 1


# ---------------------------------------------------------------- request -> chat


def test_request_translates_to_chat(make_stack):
    stack = make_stack("openai")
    body = {
        "model": "gpt-5",
        "instructions": "be brief",
        "input": [
            {"type": "message", "role": "developer", "content": "use metric units"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "hello", "annotations": []}],
            },
            {"role": "user", "content": "weather in Paris and Oslo?"},  # no "type"
            {"type": "reasoning", "id": "rs_1", "summary": []},  # nothing a chat server takes
            {
                "type": "function_call",
                "call_id": "call_a",
                "name": "get_weather",
                "arguments": '{"city": "Paris"}',
            },
            {
                "type": "function_call",
                "call_id": "call_b",
                "name": "get_weather",
                "arguments": '{"city": "Oslo"}',
            },
            {"type": "function_call_output", "call_id": "call_a", "output": "sunny"},
            {"type": "function_call_output", "call_id": "call_b", "output": "snow"},
            {
                "type": "custom_tool_call",
                "call_id": "call_c",
                "name": "apply_patch",
                "input": "*** Begin Patch",
            },
            {"type": "custom_tool_call_output", "call_id": "call_c", "output": "Done!"},
        ],
        "tools": [WEATHER, PATCH, {"type": "web_search"}],
        "tool_choice": "auto",
        "max_output_tokens": 321,
        "temperature": 0.25,
        "top_p": 0.5,
    }
    r = post(stack, body)
    assert r.status_code == 200, r.text
    sent = stack.fake.log[-1]
    assert sent.path == "/v1/chat/completions"
    chat = sent.body
    assert chat["model"] == "gpt-5"
    assert chat["max_tokens"] == 321 and chat["temperature"] == 0.25 and chat["top_p"] == 0.5
    assert not chat.get("stream")
    messages = chat["messages"]
    assert messages[0] == {"role": "system", "content": "be brief"}
    assert messages[1]["role"] in ("system", "developer")
    assert text_of(messages[1]["content"]) == "use metric units"
    assert [(m["role"], text_of(m.get("content"))) for m in messages[2:5]] == [
        ("user", "hi"),
        ("assistant", "hello"),
        ("user", "weather in Paris and Oslo?"),
    ]
    # the two consecutive calls: one assistant message (the text before it is its own)
    calls = messages[5]
    assert calls["role"] == "assistant" and not text_of(calls.get("content"))
    assert [
        (c["id"], c["type"], c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in calls["tool_calls"]
    ] == [
        ("call_a", "function", "get_weather", {"city": "Paris"}),
        ("call_b", "function", "get_weather", {"city": "Oslo"}),
    ]
    assert messages[6] == {"role": "tool", "tool_call_id": "call_a", "content": "sunny"}
    assert messages[7] == {"role": "tool", "tool_call_id": "call_b", "content": "snow"}
    custom_call = messages[8]["tool_calls"]
    assert messages[8]["role"] == "assistant" and len(custom_call) == 1
    assert custom_call[0]["id"] == "call_c"
    assert custom_call[0]["function"]["name"] == "apply_patch"
    assert json.loads(custom_call[0]["function"]["arguments"]) == {"input": "*** Begin Patch"}
    assert messages[9] == {"role": "tool", "tool_call_id": "call_c", "content": "Done!"}
    assert len(messages) == 10  # the reasoning item is dropped
    # tools: the function as is, the custom tool as a one-string-parameter function,
    # the built-in web search dropped
    tools = {t["function"]["name"]: t for t in chat["tools"]}
    assert set(tools) == {"get_weather", "apply_patch"}
    assert tools["get_weather"] == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "weather for a city",
            "parameters": WEATHER["parameters"],
        },
    }
    patch = tools["apply_patch"]["function"]
    assert patch["description"] == "edit files with a patch"
    assert patch["parameters"]["type"] == "object"
    assert patch["parameters"]["properties"]["input"]["type"] == "string"
    assert list(patch["parameters"]["properties"]) == ["input"]
    assert chat["tool_choice"] == "auto"


@pytest.mark.parametrize(
    ("choice", "chat_choice"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        (
            {"type": "function", "name": "get_weather"},
            {"type": "function", "function": {"name": "get_weather"}},
        ),
    ],
)
def test_tool_choice_translates(make_stack, choice, chat_choice):
    stack = make_stack("openai")
    r = post(stack, {"model": "m", "input": "hi", "tools": [WEATHER], "tool_choice": choice})
    assert r.status_code == 200, r.text
    assert stack.fake.log[-1].body["tool_choice"] == chat_choice


def test_string_input_and_no_tools(make_stack):
    stack = make_stack("openai")
    assert post(stack, {"model": "m", "input": "just this"}).status_code == 200
    chat = stack.fake.log[-1].body
    assert chat["messages"] == [{"role": "user", "content": "just this"}]
    assert not chat.get("tools") and "max_tokens" not in chat
    # only built-in tools: nothing a chat upstream can run goes to it
    assert post(stack, {"model": "m", "input": "x", "tools": [{"type": "web_search"}]}).is_success
    assert not stack.fake.log[-1].body.get("tools")


# ---------------------------------------------------------------- chat -> response


def test_answer_is_a_response_object(make_stack):
    stack = make_stack("openai", upstream_model="qwen3")  # the upstream answers as qwen3
    body = {"model": "gpt-5", "instructions": "be brief", "input": "hi", "tools": [WEATHER]}
    r = post(stack, body)
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    assert stack.fake.log[-1].body["model"] == "qwen3"
    resp = r.json()
    assert resp["id"].startswith("resp_") and resp["object"] == "response"
    assert isinstance(resp["created_at"], int) and resp["status"] == "completed"
    assert resp["model"] == "gpt-5"  # the client's model
    assert resp["previous_response_id"] is None
    assert resp["instructions"] == "be brief" and resp["tools"] == [WEATHER]
    assert resp["usage"]["input_tokens"] == 11 and resp["usage"]["output_tokens"] == 7
    assert resp["usage"]["total_tokens"] == 18
    [item] = resp["output"]
    assert item["id"].startswith("msg_")
    assert {k: item[k] for k in ("type", "status", "role")} == {
        "type": "message",
        "status": "completed",
        "role": "assistant",
    }
    [part] = item["content"]
    assert part["type"] == "output_text" and part["annotations"] == []
    assert part["text"] == "Hello from the fake model."
    assert r.headers[RECORD_HEADER].startswith("rec_") and r.headers[RELEASE_HEADER] == ""


def test_tool_calls_come_back_as_items(make_stack):
    stack = make_stack("openai")
    stack.fake.push(
        Turn(
            text="Let me check.",
            tool_calls=[("get_weather", {"city": "Paris"}), ("apply_patch", {"input": "*** P"})],
        )
    )
    r = post(stack, {"model": "m", "input": "weather?", "tools": [WEATHER, PATCH]})
    assert r.status_code == 200, r.text
    resp = r.json()
    message, call, custom = resp["output"]
    assert message["type"] == "message" and output_text(resp) == "Let me check."
    assert call["type"] == "function_call" and call["id"].startswith("fc_")
    assert call["call_id"].startswith("call_0_")  # the upstream's tool call id
    assert call["name"] == "get_weather" and call["status"] == "completed"
    assert json.loads(call["arguments"]) == {"city": "Paris"}
    assert custom["type"] == "custom_tool_call" and custom["call_id"].startswith("call_1_")
    assert custom["name"] == "apply_patch" and custom["input"] == "*** P"
    assert resp["status"] == "completed"


def test_length_stop_is_incomplete(make_stack):
    stack = make_stack("openai")
    stack.fake.push(Turn(text="cut sh", finish="length"))
    resp = post(stack, {"model": "m", "input": "long story", "max_output_tokens": 2}).json()
    assert stack.fake.log[-1].body["max_tokens"] == 2
    assert resp["status"] == "incomplete"
    assert resp["incomplete_details"]["reason"] == "max_output_tokens"
    assert output_text(resp) == "cut sh"


def test_anthropic_upstream(make_stack):
    stack = make_stack("anthropic")
    stack.fake.push(Turn(text="Checking.", tool_calls=[("get_weather", {"city": "Oslo"})]))
    body = {
        "model": "claude",
        "instructions": "be brief",
        "input": "weather?",
        "tools": [WEATHER],
        "max_output_tokens": 100,
    }
    r = post(stack, body)
    assert r.status_code == 200, r.text
    sent = stack.fake.log[-1]
    assert sent.path == "/v1/messages" and sent.body["max_tokens"] == 100
    assert text_of(sent.body["system"]) == "be brief"
    assert [(m["role"], text_of(m["content"])) for m in sent.body["messages"]] == [
        ("user", "weather?")
    ]
    assert sent.body["tools"][0]["name"] == "get_weather"
    resp = r.json()
    assert output_text(resp) == "Checking." and resp["model"] == "claude"
    call = resp["output"][1]
    assert call["type"] == "function_call" and call["name"] == "get_weather"
    assert json.loads(call["arguments"]) == {"city": "Oslo"}
    assert resp["usage"]["input_tokens"] == 11 and resp["usage"]["output_tokens"] == 7
    # the tool's result goes back as a tool_result block
    stack.fake.push(Turn(text="Cold."))
    follow = {
        "model": "claude",
        "tools": [WEATHER],
        "input": [
            {"role": "user", "content": "weather?"},
            {k: call[k] for k in ("type", "call_id", "name", "arguments")},
            {"type": "function_call_output", "call_id": call["call_id"], "output": "-5C"},
        ],
    }
    r = post(stack, follow)
    assert r.status_code == 200 and output_text(r.json()) == "Cold."
    messages = stack.fake.log[-1].body["messages"]
    use = next(b for b in messages[1]["content"] if b["type"] == "tool_use")
    assert use["id"] == call["call_id"] and use["input"] == {"city": "Oslo"}
    result = next(b for b in messages[2]["content"] if b["type"] == "tool_result")
    assert result["tool_use_id"] == call["call_id"] and text_of(result["content"]) == "-5C"
    rec = record(stack, r.headers[RECORD_HEADER])
    assert rec.client_dialect == "responses" and rec.upstream_dialect == "anthropic"


# ---------------------------------------------------------------- a Responses upstream


def test_responses_upstream_gets_the_body_as_is(make_stack):
    stack = make_stack("openai", upstream_responses=True)
    body = {
        "model": "gpt-5",
        "instructions": "be brief",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        "tools": [WEATHER, PATCH, {"type": "web_search"}],
        "previous_response_id": "resp_upstream_knows_this",
        "store": True,
        "reasoning": {"effort": "high"},
        "include": ["reasoning.encrypted_content"],
    }
    raw = json.dumps(body, separators=(",", ":")).encode()
    r = httpx.post(
        stack.url + PATH, content=raw, headers={**AUTH, "content-type": "application/json"}
    )
    assert r.status_code == 200, r.text
    sent = stack.fake.log[-1]
    assert sent.path == "/v1/responses" and sent.body == body
    assert TOKEN not in json.dumps(sent.headers)  # the Reef token never goes upstream
    assert r.content == stack.fake.answers[-1]  # the answer, byte for byte
    assert r.json()["previous_response_id"] == "resp_upstream_knows_this"
    rec = record(stack, r.headers[RECORD_HEADER])
    assert rec.client_dialect == "responses" and rec.status == 200
    assert rec.input_tokens == 11 and rec.output_tokens == 7
    assert output_text(rec.response) == "Hello from the fake model."


def test_responses_upstream_model_override(make_stack):
    stack = make_stack("openai", upstream_responses=True, upstream_model="o-mini")
    body = {"model": "gpt-5", "input": "hi", "temperature": 0.5}
    assert post(stack, body).status_code == 200
    assert stack.fake.log[-1].body == {**body, "model": "o-mini"}


# ---------------------------------------------------------------- errors and records


@pytest.mark.parametrize("mode", list(MODES))
def test_upstream_errors_keep_their_status_and_are_recorded(make_stack, mode):
    stack = stack_for(make_stack, mode, read_timeout=SHORT_READ_TIMEOUT)
    stack.fake.push(Turn(status=429, error="slow down"))
    r = post(stack, SIMPLE)
    assert assert_error_shape(r, 429)["message"] == "slow down"
    limited = r.headers[RECORD_HEADER]
    stack.fake.push(Turn(status=500, error="boom"))
    assert assert_error_shape(post(stack, SIMPLE), 500)["message"] == "boom"
    stack.fake.push(Turn(stall=STALL))
    r = post(stack, SIMPLE)
    assert "did not answer" in assert_error_shape(r, 504)["message"]
    stalled = r.headers[RECORD_HEADER]
    rec = record(stack, limited)
    assert rec.status == 429 and rec.error == "slow down" and rec.client_dialect == "responses"
    assert stack.store().get(stalled).status == 504


@pytest.mark.parametrize("mode", list(MODES))
def test_unreachable_upstream_is_502(make_stack, mode):
    stack = stack_for(make_stack, mode)
    stack.upstream.stop()
    r = post(stack, SIMPLE)
    assert "cannot reach the upstream" in assert_error_shape(r, 502)["message"]
    assert record(stack, r.headers[RECORD_HEADER]).status == 502


@pytest.mark.parametrize("mode", list(MODES))
def test_record_of_a_whole_answer(make_stack, mode):
    stack = stack_for(make_stack, mode)
    stack.fake.push(Turn(text="Recorded words.", usage=(23, 5)))
    headers = {**AUTH, "x-reef-scenario": "shop", "x-reef-session": "sess-42"}
    r = post(stack, {"model": "m", "input": "hi"}, headers=headers)
    assert r.status_code == 200
    rec = record(stack, r.headers[RECORD_HEADER])
    assert rec.client_dialect == "responses" and rec.scenario == "shop"
    assert rec.session_id == "sess-42" and rec.status == 200 and rec.error is None
    assert not rec.stream and rec.request == {"model": "m", "input": "hi"}
    assert rec.input_tokens == 23 and rec.output_tokens == 5
    assert output_text(rec.response) == "Recorded words."
    assert rec.response == r.json()
    assert stack.store().count() == 1


def test_fake_responses_route_answers_in_the_official_shape():
    """The scripted upstream itself (mode c leans on it): the Responses route answers
    errors, text and custom tool calls, and logs like the other routes."""
    from tests.fakes.server_thread import ServerThread

    fake = FakeUpstream()
    fake.push(
        Turn(status=503, error="busy"),
        Turn(text="", tool_calls=[("apply_patch", {"input": "patch!"}), ("f", {"a": 1})]),
    )
    with ServerThread(fake.app) as srv:
        url = srv.url + PATH
        r = httpx.post(url, json={"model": "m", "input": "x"})
        assert r.status_code == 503
        assert r.json() == {
            "error": {"message": "busy", "type": "server_error", "param": None, "code": None}
        }
        r = httpx.post(url, json={"model": "m", "input": "x", "tools": [PATCH]})
        custom, call = r.json()["output"]
        assert custom["type"] == "custom_tool_call" and custom["input"] == "patch!"
        assert call["type"] == "function_call" and json.loads(call["arguments"]) == {"a": 1}
        assert r.content == fake.answers[-1]
    assert [e.path for e in fake.log] == [PATH, PATH]
    assert fake.log[-1].body["tools"] == [PATCH]

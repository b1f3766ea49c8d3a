"""The relay's edges: auth, bad input, upstream failures, disconnects, receipts, releases."""

from __future__ import annotations

import logging
import time

import httpx
import pytest

from reef_cli.core import scenarios
from reef_cli.server.receipts import RECORD_HEADER, RELEASE_HEADER
from tests.fakes.upstream import SHORT_READ_TIMEOUT, STALL, FakeUpstream, Turn
from tests.server.conftest import LIMITED, TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}"}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
MSG = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


def post(stack, path, body=None, headers=None, **kw):
    h = dict(AUTH) if headers is None else headers
    return httpx.post(stack.url + path, json=body, headers=h, timeout=10, **kw)


def test_auth(make_stack, caplog):
    caplog.set_level(logging.DEBUG)
    stack = make_stack("openai")
    r = post(stack, "/v1/chat/completions", CHAT, headers={})
    assert r.status_code == 401 and "reef token" in r.json()["error"]["message"]
    r = post(stack, "/v1/messages", MSG, headers={"authorization": "Bearer wrong"})
    assert r.status_code == 401 and r.json()["type"] == "error"  # Anthropic-shaped
    assert post(stack, "/v1/messages", MSG, headers={"x-api-key": TOKEN}).status_code == 200
    limited = {"authorization": f"Bearer {LIMITED}"}
    r = post(stack, "/v1/chat/completions", CHAT, headers=limited)  # default scenario
    assert r.status_code == 403
    r = post(stack, "/v1/chat/completions", CHAT, headers={**limited, "x-reef-scenario": "team-a"})
    assert r.status_code == 404  # a scenario token never creates its scenario
    scenarios.create("team-a")
    r = post(stack, "/v1/chat/completions", CHAT, headers={**limited, "x-reef-scenario": "team-a"})
    assert r.status_code == 200
    assert httpx.get(stack.url + "/reef/scenarios", headers=limited).status_code == 200
    assert httpx.get(stack.url + "/reef/scenarios").status_code == 401
    r = httpx.get(stack.url + "/reef/scenarios/default/releases", headers=limited)
    assert r.status_code == 403
    r = httpx.post(stack.url + "/reef/report", headers=limited, json={"score": 1, "references": []})
    assert r.status_code == 403  # a report without receipts lands in the default scenario
    stack.flush()
    stack.reef.stop()
    raw = (stack.home / "records.sqlite3").read_bytes()
    for f in stack.home.glob("records.sqlite3*"):
        raw += f.read_bytes()
    assert TOKEN.encode() not in raw and LIMITED.encode() not in raw
    assert TOKEN not in caplog.text and LIMITED not in caplog.text


def test_bad_input_never_reaches_upstream(make_stack):
    stack = make_stack("openai", max_body_bytes=4096)
    url = stack.url + "/v1/chat/completions"
    r = httpx.post(url, content=b"{not json", headers={**AUTH, "content-type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
    r = httpx.post(url, content=b"[1,2]", headers={**AUTH, "content-type": "application/json"})
    assert r.status_code == 400
    r = httpx.post(url, content=b"hello", headers={**AUTH, "content-type": "text/plain"})
    assert r.status_code == 415
    r = httpx.post(url, content=b"x" * 10000, headers={**AUTH, "content-type": "application/json"})
    assert r.status_code == 413

    def chunks():
        for _ in range(10):
            yield b"x" * 1000  # no content-length: the cap applies while reading

    r = httpx.post(url, content=chunks(), headers={**AUTH, "content-type": "application/json"})
    assert r.status_code == 413
    r = post(stack, "/v1/messages", MSG, headers={**AUTH, "x-reef-scenario": "Not A Name"})
    assert r.status_code == 400 and r.json()["type"] == "error"
    assert stack.fake.log == []
    assert post(stack, "/v1/chat/completions", CHAT).status_code == 200  # still up


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_upstream_errors_pass_through_and_are_recorded(make_stack, dialect):
    stack = make_stack(dialect, read_timeout=SHORT_READ_TIMEOUT)
    stack.fake.push(Turn(status=429, error="slow down"))
    r = post(stack, "/v1/chat/completions", CHAT)
    assert r.status_code == 429 and r.json()["error"]["message"] == "slow down"
    failed = r.headers[RECORD_HEADER]
    stack.fake.push(Turn(status=500, error="boom"))
    r = post(stack, "/v1/messages", MSG)
    assert r.status_code == 500 and r.json()["type"] == "error"
    assert r.json()["error"]["message"] == "boom"
    stack.fake.push(Turn(stall=STALL))
    r = post(stack, "/v1/chat/completions", CHAT)
    assert r.status_code == 504 and "did not answer" in r.json()["error"]["message"]
    stack.flush()
    rec = stack.store().get(failed)
    assert rec.status == 429 and rec.error == "slow down"
    assert stack.store().get(r.headers[RECORD_HEADER]).status == 504


def test_unreachable_upstream_is_502(make_stack, home):
    stack = make_stack("openai")
    stack.upstream.stop()
    r = post(stack, "/v1/messages", MSG)
    assert r.status_code == 502 and r.json()["error"]["type"] == "api_error"
    assert "cannot reach the upstream" in r.json()["error"]["message"]
    stack.flush()
    assert stack.store().get(r.headers[RECORD_HEADER]).status == 502


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_mid_stream_drop_and_stall_end_cleanly(make_stack, dialect):
    stack = make_stack(dialect, read_timeout=SHORT_READ_TIMEOUT)
    for turn, status in ((Turn(drop_after=3), 502), (Turn(stall_mid=STALL), 504)):
        for path, body in (("/v1/chat/completions", CHAT), ("/v1/messages", MSG)):
            stack.fake.push(turn)
            with httpx.stream(
                "POST", stack.url + path, json={**body, "stream": True}, headers=AUTH, timeout=10
            ) as r:
                assert r.status_code == 200
                text = r.read().decode()
            receipt = r.headers[RECORD_HEADER]
            assert "error" in text and receipt in text  # error event, then the receipt
            stack.flush()
            rec = stack.store().get(receipt)
            assert rec.status == status and rec.error and rec.stream


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_receipt_event_comes_just_before_the_end(make_stack, dialect):
    stack = make_stack(dialect)
    path, body, end = (
        ("/v1/chat/completions", CHAT, "data: [DONE]")
        if dialect == "openai"
        else ("/v1/messages", MSG, "event: message_stop")
    )
    with httpx.stream("POST", stack.url + path, json={**body, "stream": True}, headers=AUTH) as r:
        text = r.read().decode()
    events = [e for e in text.split("\n\n") if e.strip()]
    assert events[-1].startswith(end)
    receipt_event = events[-2]
    assert r.headers[RECORD_HEADER] in receipt_event and '"reef"' in receipt_event


def test_client_disconnect_mid_stream_still_records(make_stack):
    stack = make_stack("openai")
    stack.fake.push(Turn(stall_mid=1.0))
    with httpx.stream(
        "POST", stack.url + "/v1/chat/completions", json={**CHAT, "stream": True}, headers=AUTH
    ) as r:
        receipt = r.headers[RECORD_HEADER]
        next(r.iter_raw())  # first chunk, then hang up
    deadline = time.monotonic() + 5
    while True:
        stack.flush()
        try:
            rec = stack.store().get(receipt)
            break
        except Exception:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    assert rec.status in (499, 200)
    assert post(stack, "/v1/chat/completions", CHAT).status_code == 200


def test_release_header_follows_the_chain(make_stack):
    stack = make_stack("openai", release_cache_seconds=0)
    r = post(stack, "/v1/chat/completions", CHAT, headers={**AUTH, "x-reef-scenario": "shop"})
    assert r.headers[RELEASE_HEADER] == ""
    scenarios.get("shop").chain().publish({"rules/a.md": "be kind\n"})
    time.sleep(0.05)
    post(stack, "/v1/chat/completions", CHAT, headers={**AUTH, "x-reef-scenario": "shop"})
    r = post(stack, "/v1/chat/completions", CHAT, headers={**AUTH, "x-reef-scenario": "shop"})
    assert r.headers[RELEASE_HEADER] == "1"
    stack.flush()
    assert stack.store().get(r.headers[RECORD_HEADER]).release_id == 1


def test_sessions_from_headers_and_metadata(make_stack):
    stack = make_stack("anthropic")
    a = post(stack, "/v1/messages", MSG, headers={**AUTH, "x-reef-session": "s-1"})
    b = post(stack, "/v1/messages", MSG, headers={**AUTH, "X-Claude-Code-Session-Id": "cc-2"})
    uid = "user_abc_account__session_0f8e2a4c-1111-2222-3333-444455556666"
    c = post(stack, "/v1/messages", {**MSG, "metadata": {"user_id": uid}})
    stack.flush()
    store = stack.store()
    assert store.get(a.headers[RECORD_HEADER]).session_id == "s-1"
    assert store.get(b.headers[RECORD_HEADER]).session_id == "cc-2"
    assert store.get(c.headers[RECORD_HEADER]).session_id == "0f8e2a4c-1111-2222-3333-444455556666"
    assert {s["session_id"] for s in store.sessions()} == {
        "s-1",
        "cc-2",
        "0f8e2a4c-1111-2222-3333-444455556666",
    }


def test_models_count_tokens_and_model_override(make_stack):
    fake = FakeUpstream(models=["qwen3", "llama"])
    stack = make_stack("openai", fake=fake, upstream_model="qwen3")
    r = httpx.get(stack.url + "/v1/models", headers=AUTH)
    assert [m["id"] for m in r.json()["data"]] == ["qwen3", "llama"]
    r = httpx.get(
        stack.url + "/v1/models", headers={"x-api-key": TOKEN, "anthropic-version": "2023-06-01"}
    )
    assert r.json()["data"][0]["type"] == "model"
    r = post(
        stack,
        "/v1/messages/count_tokens",
        {"model": "x", "messages": [{"role": "user", "content": "hello there"}]},
    )
    assert r.status_code == 200 and r.json()["input_tokens"] > 0
    post(stack, "/v1/chat/completions", CHAT)
    assert fake.log[-1].body["model"] == "qwen3"
    r = httpx.post(stack.url + "/v1/messages?beta=true", json=MSG, headers=AUTH)
    assert r.status_code == 200 and fake.log[-1].path == "/v1/chat/completions"

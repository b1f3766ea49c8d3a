"""``POST /v1/embeddings`` (issue 27, item 4): relayed to an OpenAI-dialect upstream and
recorded like a chat exchange (a receipt, the credited release, metrics), with the
client's model kept; never read as a turn of a conversation; refused for an Anthropic
upstream with one line, nothing recorded."""

from __future__ import annotations

import httpx

from reef_cli.core import evidence
from reef_cli.core.records import EMBEDDINGS
from reef_cli.server.receipts import RECORD_HEADER, RELEASE_HEADER
from tests.server.conftest import TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}"}
EMBED = {"model": "nomic-embed-text", "input": ["the first text", "a second one here"]}


def _embed(stack, body=EMBED, **headers: str) -> httpx.Response:
    return httpx.post(stack.url + "/v1/embeddings", json=body, headers={**AUTH, **headers})


def test_embeddings_are_relayed_and_recorded(make_stack):
    stack = make_stack("openai", upstream_model="chat-model")
    r = _embed(stack, **{"x-reef-session": "s1"})
    assert r.status_code == 200, r.text
    assert [d["embedding"] for d in r.json()["data"]] == [[14, 3], [17, 4]]
    assert stack.fake.log[-1].path == "/v1/embeddings"
    assert stack.fake.log[-1].body["model"] == "nomic-embed-text"  # not --upstream-model
    receipt = r.headers[RECORD_HEADER]
    assert RELEASE_HEADER in r.headers
    stack.flush()
    record = stack.store().get(receipt)
    assert (record.client_dialect, record.upstream_dialect) == (EMBEDDINGS, EMBEDDINGS)
    assert record.request == EMBED and record.input_tokens == 7 and record.status == 200
    assert record.session_id == "s1" and not record.is_turn
    metrics = httpx.get(stack.url + "/metrics", headers=AUTH).text
    assert 'route="/v1/embeddings"' in metrics


def test_an_embedding_is_no_turn_of_a_session(make_stack):
    stack = make_stack("openai")
    r = _embed(stack, **{"x-reef-session": "s1"})
    chat = httpx.post(
        stack.url + "/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        headers={**AUTH, "x-reef-session": "s1"},
    )
    assert r.status_code == chat.status_code == 200
    stack.flush()
    [session] = evidence.collect(stack.store(), "default")
    assert session.receipts == [chat.headers[RECORD_HEADER]]


def test_an_anthropic_upstream_refuses_them_after_auth(make_stack):
    stack = make_stack("anthropic")
    assert httpx.post(stack.url + "/v1/embeddings", json=EMBED).status_code == 401
    r = _embed(stack)
    assert r.status_code == 400
    assert "no embeddings API" in r.json()["error"]["message"]
    assert RECORD_HEADER not in r.headers
    assert _embed(stack, body=[1, 2]).status_code == 400  # not an object: one line too
    stack.flush()
    assert stack.store().count() == 0 and stack.fake.log == []

"""A record as token ids: the engine's own, or a streamed record re-tokenized to the same
ids (checked against reefd's torch engine answering the same request both ways)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from reef_cli.core.errors import ConfigError
from reef_cli.core.records import Record
from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.server import assemble
from tests.reefd.weight_recipes.records import SCENARIO, answer, chat, put

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Name two letters."}]},
]


@pytest.fixture
def tokenizer() -> Any:
    pytest.importorskip("transformers")
    from reefd import models

    return models.byte_tokenizer()


@pytest.fixture
def engine() -> Iterator[str]:
    """reefd's torch engine on the tiny model, its head rewired so greedy decoding writes
    only 'A' or 'B' (the sign of one hidden unit): valid text, so a round trip is exact."""
    torch = pytest.importorskip("torch")
    from reefd import models
    from reefd.engine.torch_server import create_engine_app
    from tests.fakes.server_thread import ServerThread

    loaded = models.load("tiny", seed=2)
    with torch.no_grad():
        loaded.model.model.norm.weight.zero_()
        loaded.model.model.norm.weight[0] = 1.0
        loaded.model.lm_head.weight.zero_()
        loaded.model.lm_head.weight[ord("A"), 0] = 1.0
        loaded.model.lm_head.weight[ord("B"), 0] = -1.0
    server = ServerThread(create_engine_app(loaded), timeout_graceful_shutdown=1)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def _record(request: dict[str, Any], response: Any, *, stream: bool) -> Record:
    token_ids, logprobs = (None, None) if stream else assemble.tokens_of(response)
    return Record(
        id="rec_" + "0" * 24,
        scenario=SCENARIO,
        client_dialect="openai",
        upstream_dialect="openai",
        stream=stream,
        request=request,
        response=response,
        status=200,
        token_ids=token_ids,
        logprobs=logprobs,
    )


def test_a_streamed_record_retokenizes_to_the_engines_ids(engine: str, tokenizer: Any) -> None:
    from reefd.weight_recipes.samples import engine_tokens, retokenize, tokens_of

    body = {"model": "tiny", "messages": MESSAGES, "max_tokens": 6, "temperature": 0}
    plain = httpx.post(f"{engine}/v1/chat/completions", json=body, timeout=30).json()
    raw = b""
    with httpx.stream(
        "POST", f"{engine}/v1/chat/completions", json={**body, "stream": True}, timeout=30
    ) as response:
        for chunk in response.iter_bytes():
            raw += chunk
    streamed = _record({**body, "stream": True}, assemble.openai_stream(raw), stream=True)
    direct = _record(body, plain, stream=False)

    from_engine = engine_tokens(direct)
    assert from_engine is not None and from_engine.source == "engine"
    assert from_engine.old_logprobs is not None
    assert len(from_engine.old_logprobs) == len(from_engine.response_ids) == 6
    assert set(plain["choices"][0]["message"]["content"]) <= {"A", "B"}

    again = retokenize(streamed, tokenizer)
    assert again is not None and again.source == "retokenized"
    assert again.prompt_ids == from_engine.prompt_ids
    assert again.response_ids == from_engine.response_ids
    assert again.old_logprobs is None  # the trainer recomputes pi_old
    assert tokens_of(streamed, tokenizer) == again
    assert tokens_of(direct, None) == from_engine  # engine ids need no tokenizer


def test_an_answer_that_stopped_ends_with_the_end_of_turn_token(tokenizer: Any) -> None:
    from reefd import models
    from reefd.weight_recipes.samples import retokenize

    stopped = _record(chat(MESSAGES, stream=True), answer("hi"), stream=True)
    cut = _record(chat(MESSAGES, stream=True), answer("hi", finish="length"), stream=True)
    end = tokenizer.convert_tokens_to_ids(models.IM_END)
    # the engine's ids include the stop token when it stopped on one
    assert retokenize(stopped, tokenizer).response_ids == [ord("h"), ord("i"), end]  # type: ignore[union-attr]
    assert retokenize(cut, tokenizer).response_ids == [ord("h"), ord("i")]  # type: ignore[union-attr]


def test_records_that_cannot_be_tokens(tokenizer: Any) -> None:
    from reefd.weight_recipes.samples import engine_tokens, response_text, retokenize, tokens_of

    store = SQLiteStore()
    empty = put(store, reply="")
    assert retokenize(store.get(empty.id), tokenizer) is None
    anthropic = _record(chat(MESSAGES), answer("hi"), stream=True)
    anthropic.client_dialect = "anthropic"
    assert retokenize(anthropic, tokenizer) is None
    odd = _record(chat(MESSAGES), answer("hi"), stream=False)
    odd.token_ids = {"prompt": [1, 2], "response": [3, True]}
    assert engine_tokens(odd) is None
    misfit = _record(chat(MESSAGES), answer("hi"), stream=False)
    misfit.token_ids, misfit.logprobs = {"prompt": [1], "response": [2, 3]}, [-0.5]
    tokens = engine_tokens(misfit)
    assert tokens is not None and tokens.old_logprobs is None  # logprobs that do not fit
    with pytest.raises(ConfigError):
        tokens_of(store.get(empty.id), None)
    call = answer("")
    call["choices"][0]["message"]["tool_calls"] = [
        {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    ]
    with_call = _record(chat(MESSAGES), call, stream=True)
    assert response_text(with_call) == '{"tool": "ls", "arguments": "{}"}'

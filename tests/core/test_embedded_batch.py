"""The batch decoder on the real lite model (SmolLM2-135M, seconds): what it promises.

- a request decoded alone gives the sequential path's answer (``create_chat_completion``,
  greedy), stop strings and finish reasons included;
- requests decoded together all finish within their limits; a shared prompt prefix is
  read once; a cancelled or late request ends alone; streamed pieces are the answer;
- a schema gives JSON; a prompt beyond the context is one clear error.

Answers decoded *beside others* may differ from the sequential ones (other rows change
the rounding): that is measured in bench/embedded_batching.py, not promised here.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from reef_cli.core import embedded
from reef_cli.core.embedded_batch import BatchDecoder, Request, chat_request
from reef_cli.core.errors import ModelError

LITE = embedded.spec_named("smollm2-135m")
pytestmark = pytest.mark.skipif(
    embedded.model_path(LITE) is None,
    reason="the lite embedded model is not installed (./install.sh --dev installs it)",
)
SYSTEM = "You are a careful assistant. " + "Answer plainly and briefly. " * 20


@pytest.fixture(scope="module")
def llama() -> Iterator[Any]:
    from llama_cpp import Llama

    path = embedded.model_path(LITE)
    model = Llama(model_path=str(path), n_ctx=4096, n_threads=2, verbose=False, seed=0)
    yield model
    model.close()


@pytest.fixture
def decoder(llama: Any) -> Iterator[BatchDecoder]:
    decoding = BatchDecoder(llama, slots=4, cells=4 * 2048)
    yield decoding
    decoding.close()


def chat(question: str, max_tokens: int = 40, **extra: Any) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": question},
        ],
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "repeat_penalty": LITE.repeat_penalty,
        **extra,
    }


QUESTIONS = ["What is the capital of France?", "Name a colour.", "Count to five.", "Say hi."]


def test_a_request_decoded_alone_is_the_sequential_answer(
    llama: Any, decoder: BatchDecoder
) -> None:
    for question in QUESTIONS:
        sequential = llama.create_chat_completion(**chat(question))["choices"][0]
        batched = decoder.submit(chat_request(llama, chat(question))).wait()
        assert batched.error is None and batched.text.strip()
        assert batched.text == sequential["message"]["content"], question
        assert batched.finish == sequential["finish_reason"]


def test_stop_strings_cut_the_answer_as_the_sequential_path_does(
    llama: Any, decoder: BatchDecoder
) -> None:
    ask = chat("Count from one to ten in words, separated by commas.", stop=[","])
    sequential = llama.create_chat_completion(**ask)["choices"][0]
    batched = decoder.submit(chat_request(llama, ask)).wait()
    assert "," not in batched.text
    assert (batched.text, batched.finish) == (
        sequential["message"]["content"],
        sequential["finish_reason"],
    )


def test_requests_decoded_together_all_finish_within_their_limits(
    llama: Any, decoder: BatchDecoder
) -> None:
    requests = [chat_request(llama, chat(q, max_tokens=8 + 8 * i)) for i, q in enumerate(QUESTIONS)]
    threads = [threading.Thread(target=decoder.submit, args=(r,)) for r in requests]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for request in requests:
        request.wait()
        assert request.error is None
        assert request.text.strip()
        assert 1 <= len(request.tokens) <= request.max_tokens
        assert request.finish in ("stop", "length")


def test_a_shared_system_prompt_is_read_once(llama: Any, decoder: BatchDecoder) -> None:
    first = decoder.submit(chat_request(llama, chat(QUESTIONS[0]))).wait()
    second = decoder.submit(chat_request(llama, chat(QUESTIONS[1]))).wait()
    assert first.reused == 0
    # the system prompt and the template's start: more than the system text's own tokens
    system_tokens = len(llama.tokenize(SYSTEM.encode(), add_bos=False))
    assert second.reused >= system_tokens
    again = decoder.submit(chat_request(llama, chat(QUESTIONS[1]))).wait()
    assert again.reused == len(again.prompt) - 1  # all but the token that gives logits
    assert again.text == second.text


def test_a_cancelled_stream_ends_alone(llama: Any, decoder: BatchDecoder) -> None:
    pieces: list[str] = []
    cancelled = chat_request(llama, chat("Tell me a long story about a dragon.", 120))

    def first_piece_then_cancel(text: str) -> None:
        pieces.append(text)
        cancelled.cancel()

    cancelled.on_text = first_piece_then_cancel
    other = chat_request(llama, chat(QUESTIONS[0], 30))
    decoder.submit(cancelled)
    decoder.submit(other)
    assert cancelled.wait().error is None and len(cancelled.tokens) < 10
    assert pieces  # it streamed before it was cancelled
    assert other.wait().error is None and other.text.strip()


def test_a_request_past_its_deadline_fails_alone(llama: Any, decoder: BatchDecoder) -> None:
    late = chat_request(
        llama, chat("Tell me a long story about a dragon.", 400), time.monotonic() + 0.3
    )
    other = chat_request(llama, chat(QUESTIONS[0], 30))
    decoder.submit(late)
    decoder.submit(other)
    assert isinstance(late.wait().error, ModelError)
    assert "time limit" in str(late.error)
    assert other.wait().error is None and other.text.strip()


def test_streamed_pieces_are_the_answer(llama: Any, decoder: BatchDecoder) -> None:
    pieces: list[str] = []
    request = chat_request(llama, chat("Describe the sea in two sentences.", 60))
    request.on_text = pieces.append
    decoder.submit(request).wait()
    assert len(pieces) > 3
    assert "".join(pieces) == request.text


def test_a_schema_gives_json(llama: Any, decoder: BatchDecoder) -> None:
    schema = {
        "type": "object",
        "properties": {"colour": {"type": "string"}},
        "required": ["colour"],
    }
    ask = chat(
        "Name a colour, as JSON.",
        60,
        response_format={"type": "json_object", "schema": schema},
    )
    request = decoder.submit(chat_request(llama, ask)).wait()
    assert isinstance(json.loads(request.text)["colour"], str)


def test_a_prompt_beyond_the_context_is_one_clear_error(llama: Any) -> None:
    small = BatchDecoder(llama, slots=2, cells=2 * 256)
    try:
        with pytest.raises(ModelError) as refused:
            small.submit(chat_request(llama, chat("word " * 400)))
        assert "does not fit" in refused.value.one_line()
        assert "shorten the prompt" in refused.value.one_line()
    finally:
        small.close()


def test_a_closed_decoder_refuses_new_requests(llama: Any) -> None:
    closing = BatchDecoder(llama, slots=2, cells=2 * 1024)
    closing.close()
    with pytest.raises(ModelError):
        closing.submit(Request(prompt=[1, 2], max_tokens=2, stops=[], sampler=None))

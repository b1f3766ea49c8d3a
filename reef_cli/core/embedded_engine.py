"""The embedded model in-process: SmolLM2-135M-Instruct through llama-cpp-python.

One model per process, loaded on first use (about 250 MB, a second or two). llama.cpp is
not thread-safe, so calls are serialised with a lock. ``llama_cpp`` is imported here only.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from reef_cli.core import embedded
from reef_cli.core.errors import ModelError

_lock = threading.Lock()
_model: Any = None

CONTEXT_TOKENS = 4096
# A 135M model loops on its own phrases without a firm penalty.
REPEAT_PENALTY = 1.3


def load() -> Any:
    global _model
    with _lock:
        if _model is None:
            gguf = embedded.gguf_path()
            if gguf is None or not embedded.runtime_available():
                raise ModelError(
                    "the embedded model is not installed",
                    "run ./install.sh, or set a model: reef config set model ollama/llama3.2",
                )
            from llama_cpp import Llama

            _model = Llama(
                model_path=str(gguf),
                n_ctx=CONTEXT_TOKENS,
                n_threads=max(1, min(4, os.cpu_count() or 1)),
                verbose=False,
                seed=int(os.environ.get("REEF_EMBEDDED_SEED", "0")),
            )
        return _model


def chat(
    messages: list[dict[str, Any]],
    *,
    max_tokens: int = 512,
    temperature: float = 0.2,
    schema: dict[str, Any] | None = None,
    stop: list[str] | None = None,
    deadline: float | None = None,
) -> dict[str, Any]:
    """An OpenAI-shaped chat completion; ``schema`` constrains output with a grammar.

    With a ``deadline`` (``time.monotonic()``) the answer is generated as a stream and
    abandoned between two tokens once the deadline has passed (``ModelError``): llama.cpp
    has no cancel, and an exception raised inside its sampler callbacks is swallowed."""
    model = load()
    kwargs: dict[str, Any] = {
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "stop": stop,
        "repeat_penalty": REPEAT_PENALTY,
    }
    if schema is not None:
        kwargs["response_format"] = {"type": "json_object", "schema": schema}
    with _lock:
        if deadline is None:
            return dict(model.create_chat_completion(**kwargs))
        return _until(model, kwargs, deadline)


def _until(model: Any, kwargs: dict[str, Any], deadline: float) -> dict[str, Any]:
    """``create_chat_completion`` as a stream, stopped at ``deadline``; the caller holds
    the lock."""
    import time

    parts: list[str] = []
    finish: str | None = None
    name = "embedded"
    stream = model.create_chat_completion(**kwargs, stream=True)
    try:
        for chunk in stream:
            name = chunk.get("model", name)
            choice = chunk["choices"][0]
            parts.append((choice.get("delta") or {}).get("content") or "")
            finish = choice.get("finish_reason") or finish
            if time.monotonic() > deadline and finish is None:
                raise ModelError("the embedded model ran past its time budget and was stopped")
    finally:
        stream.close()
    text = "".join(parts)
    prompt = _count(model, "\n".join(str(m.get("content") or "") for m in kwargs["messages"]))
    completion = _count(model, text)
    return {
        "model": name,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def _count(model: Any, text: str) -> int:
    return len(model.tokenize(text.encode("utf-8"), add_bos=False)) if text else 0


def chat_stream(
    messages: list[dict[str, Any]],
    *,
    max_tokens: int = 512,
    temperature: float = 0.2,
    stop: list[str] | None = None,
) -> Any:
    """Yield OpenAI-shaped stream chunks. Holds the lock for the whole generation."""
    model = load()
    with _lock:
        yield from model.create_chat_completion(
            messages=messages,
            max_tokens=max_tokens,
            temperature=temperature,
            stop=stop,
            repeat_penalty=REPEAT_PENALTY,
            stream=True,
        )


def count_tokens(messages: list[dict[str, Any]]) -> int:
    """Prompt tokens of ``messages`` by the model's own tokenizer (for usage in streams)."""
    model = load()
    text = "\n".join(str(m.get("content") or "") for m in messages)
    with _lock:
        return len(model.tokenize(text.encode("utf-8"), add_bos=False))

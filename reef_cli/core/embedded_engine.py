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
) -> dict[str, Any]:
    """An OpenAI-shaped chat completion; ``schema`` constrains output with a grammar."""
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
        return dict(model.create_chat_completion(**kwargs))


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

"""The embedded model in-process, through llama-cpp-python.

The model in use comes from the registry (``embedded.resolve``: the ``embedded_model``
setting, else the default rule). One model per process, loaded on first use after its
sha256 is verified (once per version of the file, see ``embedded``): SmolLM2 is about
250 MB and a second to load, Qwen2.5-Coder-1.5B about 1.6 GB.

Calls from any thread are decoded together by one worker (``embedded_batch``), up to the
``embedded_slots`` setting at once; with ``embedded_slots = 1`` they take turns on the
model's own context under a lock, one sequence at a time (llama.cpp is not thread-safe).
``llama_cpp`` is imported here and in ``embedded_batch`` only.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import logging
import os
import threading
import time
from typing import Any

from reef_cli.core import embedded
from reef_cli.core.errors import ModelError, ReefError

log = logging.getLogger("reef.embedded")
_lock = threading.Lock()
_model: Any = None
_loaded: str | None = None  # the registry name of the loaded model
_deadline: float | None = None  # the deadline of the call in flight (set under _lock)
_abort_hook: Any = None  # llama.cpp's abort callback, kept alive as long as the model
_decoder: Any = None  # the BatchDecoder, when more than one slot is set

CONTEXT_TOKENS = 4096
# A 135M model loops on its own phrases without a firm penalty; each registry entry
# carries its own (``ModelSpec.repeat_penalty``), this is for a model outside it.
REPEAT_PENALTY = 1.3


def seed() -> int:
    """``$REEF_EMBEDDED_SEED`` (default 0): the sampler's seed, an integer in 0..2**32-1."""
    raw = os.environ.get("REEF_EMBEDDED_SEED", "").strip() or "0"
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if not 0 <= value < 2**32:
        from reef_cli.core.errors import ConfigError

        raise ConfigError(
            f"$REEF_EMBEDDED_SEED is {raw[:40]!r}, not a seed", "export REEF_EMBEDDED_SEED=0"
        )
    return value


def call_seed(chat: dict[str, Any]) -> int:
    """The sampler's seed for one call: ``$REEF_EMBEDDED_SEED`` and the request itself.
    llama-cpp-python would otherwise derive each call's seed from the previous call's, so
    a sampled answer (a GEPA reflection) would depend on how many calls the process made
    before it — which the answer cache changes. Never llama.cpp's "random" seed."""
    body = json.dumps(
        {"seed": seed(), "request": chat}, sort_keys=True, ensure_ascii=False, default=str
    )
    return int.from_bytes(hashlib.sha256(body.encode("utf-8")).digest()[:4], "big") & 0x7FFFFFFF


def load() -> Any:
    """The model in use, loaded once; its file is verified first (``ModelCorrupt`` if it
    does not match its pinned sha256). A chosen model that is not installed falls back to
    an installed one, with a warning."""
    global _model, _loaded, _decoder
    with _lock:
        if _model is None:
            found = embedded.resolve()
            if found.path is None:
                raise ModelError(
                    f"the embedded model ({found.wanted}) is not installed",
                    f"reef model install {found.wanted} (or ./install.sh), or set a model: "
                    "reef config set model ollama/llama3.2",
                )
            if not embedded.runtime_available():
                raise ModelError(
                    "llama-cpp-python, which runs the embedded model, is not installed",
                    "./install.sh (builds llama-cpp-python)",
                )
            if found.note and found.source == "setting":
                log.warning("reef: embedded model: %s", found.note)
            elif found.note:
                log.info("embedded model: %s", found.note)
            embedded.verify(found.spec, found.path)
            from llama_cpp import Llama

            count = slots()
            model = Llama(
                model_path=str(found.path),
                # batched: the model's own context only formats and tokenizes
                n_ctx=CONTEXT_TOKENS if count == 1 else 512,
                n_threads=max(1, min(4, os.cpu_count() or 1)),
                verbose=False,
                seed=seed(),
            )
            _watch_deadline(model)
            if count > 1:
                from reef_cli.core.embedded_batch import BatchDecoder

                _decoder = BatchDecoder(model, slots=count, cells=count * CONTEXT_TOKENS)
            _model, _loaded = model, found.spec.name
            atexit.register(_close)
        return _model


def slots() -> int:
    """How many calls the embedded model decodes together (the ``embedded_slots``
    setting); 1 is the sequential path."""
    from reef_cli.core.config import load_settings

    return load_settings().embedded_slots


def _close() -> None:
    """Free the model while the interpreter is still whole: left to ``Llama.__del__`` at
    shutdown, llama-cpp-python's teardown runs after its own module globals are gone and
    prints a TypeError traceback to stderr (into ``reef serve``'s log) on every exit."""
    global _model, _loaded, _decoder
    with _lock:
        model, _model, _loaded = _model, None, None
        decoder, _decoder = _decoder, None
    if decoder is not None:
        decoder.close()
    if model is not None and hasattr(model, "close"):
        model.close()


def _past_deadline(_data: Any) -> bool:
    return _deadline is not None and time.monotonic() > _deadline


def _watch_deadline(model: Any) -> None:
    """Let llama.cpp stop a decode once the call in flight is past its deadline: the
    prompt's processing (seconds for a long prompt on a small CPU) yields no token to
    check between, so only this bounds it. Checked between two of the graph's nodes."""
    global _abort_hook
    import llama_cpp

    setter = getattr(llama_cpp, "llama_set_abort_callback", None)
    if setter is None or not hasattr(model, "ctx"):
        return
    _abort_hook = llama_cpp.ggml_abort_callback(_past_deadline)
    setter(model.ctx, _abort_hook, None)


def loaded_name() -> str | None:
    """The registry name of the model this process loaded (None before the first use)."""
    return _loaded


def identity() -> dict[str, Any] | None:
    """Everything besides the request that decides a greedy answer: the model (its pinned
    sha256), the decoding settings Reef adds and the llama.cpp build. The answer cache's
    key (``answer_cache``). None when no embedded model is installed, and when calls are
    batched: a batched answer also depends on the sequences decoded beside it (their
    rows change the rounding; bench/embedded_batching.py counts the answers that differ).
    Never loads the model."""
    if slots() > 1:
        return None
    spec = embedded.REGISTRY.get(_loaded or "")
    if spec is None:
        try:
            found = embedded.resolve()
        except ReefError:  # a bad setting: the call itself reports it
            return None
        if found.path is None:
            return None
        spec = found.spec
    build = _llama_cpp_version()
    if build is None:
        return None
    return {
        "model": spec.name,
        "sha256": spec.sha256,
        "repeat_penalty": spec.repeat_penalty,
        "context_tokens": CONTEXT_TOKENS,
        "llama_cpp_python": build,
    }


@functools.cache
def _llama_cpp_version() -> str | None:
    """The installed llama-cpp-python's version (read once: a metadata scan)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llama-cpp-python")
    except PackageNotFoundError:
        return None


def _repeat_penalty() -> float:
    spec = embedded.REGISTRY.get(_loaded or "")
    return spec.repeat_penalty if spec else REPEAT_PENALTY


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
    kwargs = _chat_kwargs(messages, max_tokens, temperature, stop, schema)
    if _decoder is not None:
        return _batched(model, kwargs, deadline)
    with _lock:
        _fresh_if_sampled(model, temperature)
        if deadline is None:
            return dict(model.create_chat_completion(**kwargs))
        return _until(model, kwargs, deadline)


def _chat_kwargs(
    messages: list[dict[str, Any]],
    max_tokens: int,
    temperature: float,
    stop: list[str] | None,
    schema: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``create_chat_completion``'s arguments for one call, on either path: the model's
    repeat penalty, a grammar for ``schema``, the call's own seed (``call_seed``)."""
    kwargs: dict[str, Any] = {
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "stop": stop,
        "repeat_penalty": _repeat_penalty(),
    }
    if schema is not None:
        kwargs["response_format"] = {"type": "json_object", "schema": schema}
    kwargs["seed"] = call_seed(kwargs)
    return kwargs


def _fresh_if_sampled(model: Any, temperature: float) -> None:
    """Before a sampled call, forget the previous call's prompt: llama-cpp-python reuses
    its longest common prefix, and a prompt read in different pieces rounds a little
    differently — enough to move a sampled token (a GEPA reflection differed between a
    run and its rerun from cached answers). Greedy calls keep the reuse: it is what makes
    an evaluation's shared system prompt cheap, and their answers hold (the A/A controls).
    The caller holds the lock."""
    if temperature > 0:
        model.reset()


def _until(model: Any, kwargs: dict[str, Any], deadline: float) -> dict[str, Any]:
    """``create_chat_completion`` as a stream, stopped at ``deadline`` — between two
    tokens, and inside the prompt's processing (``_watch_deadline``); the caller holds
    the lock."""
    global _deadline
    late = ModelError(
        "the embedded model ran past this call's time limit and was stopped",
        "give the job more time (--max-seconds) or use a faster model",
    )
    if time.monotonic() > deadline:  # e.g. loading the model took the time left
        raise late
    parts: list[str] = []
    finish: str | None = None
    name = "embedded"
    _deadline = deadline
    stream = model.create_chat_completion(**kwargs, stream=True)
    try:
        for chunk in stream:
            name = chunk.get("model", name)
            choice = chunk["choices"][0]
            parts.append((choice.get("delta") or {}).get("content") or "")
            finish = choice.get("finish_reason") or finish
            if time.monotonic() > deadline and finish is None:
                raise late
    except RuntimeError as exc:  # llama_decode returned 2: aborted at the deadline
        if time.monotonic() > deadline:
            raise late from exc
        raise
    finally:
        _deadline = None
        stream.close()
    text = "".join(parts)
    prompt = _count(model, _prompt_text(kwargs["messages"]))
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
    """Yield OpenAI-shaped stream chunks (sequential: holding the lock throughout)."""
    model = load()
    kwargs = _chat_kwargs(messages, max_tokens, temperature, stop)
    if _decoder is not None:
        yield from _batched_stream(model, kwargs)
        return
    with _lock:
        _fresh_if_sampled(model, temperature)
        yield from model.create_chat_completion(**kwargs, stream=True)


def count_tokens(messages: list[dict[str, Any]]) -> int:
    """Prompt tokens of ``messages`` by the model's own tokenizer (for usage in streams)."""
    model = load()
    with _lock:
        return _count(model, _prompt_text(messages))


def _prompt_text(messages: list[dict[str, Any]]) -> str:
    """What usage counts of a prompt: the messages' text, one per line."""
    return "\n".join(str(m.get("content") or "") for m in messages)


# --- the batched path -------------------------------------------------------------------


def _batched(model: Any, kwargs: dict[str, Any], deadline: float | None) -> dict[str, Any]:
    from reef_cli.core.embedded_batch import chat_request, late

    if deadline is not None and time.monotonic() > deadline:
        raise late()  # e.g. loading the model took the time left
    request = _decoder.submit(chat_request(model, kwargs, deadline)).wait()
    if request.error is not None:
        raise request.error
    return {
        "model": _loaded or "embedded",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": request.text},
                "finish_reason": request.finish,
            }
        ],
        "usage": {
            "prompt_tokens": len(request.prompt),
            "completion_tokens": len(request.tokens),
            "total_tokens": len(request.prompt) + len(request.tokens),
        },
    }


def _batched_stream(model: Any, kwargs: dict[str, Any]) -> Any:
    """``chat_stream`` on the batched path: the text as the decoder makes it final."""
    import queue

    from reef_cli.core.embedded_batch import chat_request

    request = chat_request(model, kwargs)
    pieces: queue.Queue[str] = queue.Queue()
    request.on_text = pieces.put
    _decoder.submit(request)
    name = _loaded or "embedded"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "object": "chat.completion.chunk",
            "model": name,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    try:
        yield chunk({"role": "assistant"})
        while not (request.done.is_set() and pieces.empty()):
            try:
                yield chunk({"content": pieces.get(timeout=0.05)})
            except queue.Empty:
                continue
        if request.error is not None:
            raise request.error
        yield chunk({}, request.finish)
    finally:
        request.cancel()  # a reader that went away stops the decoding

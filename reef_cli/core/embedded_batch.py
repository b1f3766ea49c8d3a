"""Several embedded-model requests decoded together: llama.cpp's multi-sequence batches.

One sequence at a time leaves a CPU idle between the model's passes over its weights;
here every request in flight adds its next token to one batch, and one ``llama_decode``
advances them all (bench/embedded_batching.py measures the gain). A single worker thread
owns the llama.cpp context; callers :meth:`BatchDecoder.submit` a :class:`Request` and
wait on it.

- **Slots**: at most ``slots`` requests decode at once; the rest wait in arrival order
  (first come, first served). A request is admitted only while the KV cache has room for
  every admitted request's prompt and ``max_tokens``, so a decode never runs out of room.
- **Shared prefixes**: each sequence's cache entries stay after it ends (parked) until
  their room is needed. A new request starts from the longest prefix of its prompt any
  sequence holds — the harness rendered as the system prompt, the same for every task of
  an evaluation — copied in the cache (``llama_memory_seq_cp``), not computed again.
- **Prompts in chunks**: a long prompt is fed :data:`BATCH_TOKENS` tokens per step beside
  the others' next tokens, so requests in flight keep going while it is read.
- **Cancellation and deadlines**: a cancelled request, or one past its deadline, is
  dropped before the next step; a step whose every sequence is past its deadline is
  aborted inside the decode (llama.cpp's abort callback).
- **The same answers**: prompts are formatted by llama-cpp-python's own chat handler for
  the model and sampled by its own sampler chain (``Llama._init_sampler``: the repeat
  penalty, a grammar for a schema, greedy at temperature 0), and stop strings are cut the
  way ``Llama.create_completion`` cuts them.

Everything that touches llama.cpp happens on the worker thread; ``llama_cpp`` is imported
only when a decoder is built.
"""

from __future__ import annotations

import codecs
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reef_cli.core.errors import ModelError

log = logging.getLogger("reef.embedded")
_seeding = threading.Lock()

BATCH_TOKENS = 512  # tokens per decode, as the sequential path's n_batch


@dataclass(eq=False)
class Request:
    """One completion in flight: what to decode, and (once ``done``) what came of it."""

    prompt: list[int]
    max_tokens: int
    stops: list[bytes]  # stop strings: the text ends before the first one found
    sampler: Any  # llama-cpp-python's LlamaSampler for this request (penalties, grammar)
    deadline: float | None = None  # time.monotonic(); past it: ModelError
    on_text: Callable[[str], None] | None = None  # streamed text, as it becomes final
    # the outcome
    tokens: list[int] = field(default_factory=list)
    text: str = ""
    finish: str | None = None  # "stop" | "length"
    error: Exception | None = None
    done: threading.Event = field(default_factory=threading.Event)
    # the worker's bookkeeping
    cancelled: bool = False
    seq: int = -1
    fed: int = 0  # prompt tokens in the cache
    reused: int = 0  # of them, those another sequence had computed (a shared prefix)
    logits_at: int = -1  # this request's row in the last batch, when it asked for logits
    sent: int = 0  # bytes of text already given to on_text
    utf8: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="ignore")
    )

    def cancel(self) -> None:
        """Stop decoding this request (a stream whose reader went away)."""
        self.cancelled = True

    def wait(self) -> Request:
        self.done.wait()
        return self

    def past_deadline(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline


class _Captured(Exception):
    def __init__(self, kwargs: dict[str, Any]) -> None:
        super().__init__("captured")
        self.kwargs = kwargs


class _Capture:
    """The Llama as its chat handler sees it, except that ``create_completion`` hands back
    its arguments: the prompt formatted and tokenized by the model's own chat template,
    its stop strings, the grammar of a schema — exactly what the sequential path runs."""

    def __init__(self, llama: Any) -> None:
        self._llama = llama

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llama, name)

    def create_completion(self, **kwargs: Any) -> Any:
        raise _Captured(kwargs)


# create_completion's sampling arguments that _init_sampler takes under the same name
_SAMPLER_SETTINGS = (
    "top_k",
    "top_p",
    "min_p",
    "typical_p",
    "repeat_penalty",
    "frequency_penalty",
    "presence_penalty",
    "tfs_z",
    "mirostat_mode",
    "mirostat_tau",
    "mirostat_eta",
)


def chat_request(llama: Any, chat: dict[str, Any], deadline: float | None = None) -> Request:
    """The :class:`Request` that decodes ``llama.create_chat_completion(**chat)``."""
    from llama_cpp import llama_chat_format

    handler = (
        llama.chat_handler
        or llama._chat_handlers.get(llama.chat_format)
        or llama_chat_format.get_chat_completion_handler(llama.chat_format)
    )
    try:
        handler(llama=_Capture(llama), **chat)  # type: ignore[arg-type]
    except _Captured as captured:
        got = captured.kwargs
    else:  # pragma: no cover - every handler ends in create_completion
        raise ModelError("the model's chat template produced no prompt", "reef model list")
    with _seeding:  # _init_sampler reads the seed from the shared Llama
        if got.get("seed") is not None:
            llama.set_seed(int(got["seed"]))
        sampler = llama._init_sampler(
            temp=got["temperature"],
            grammar=got.get("grammar"),
            **{name: got[name] for name in _SAMPLER_SETTINGS},
        )
    stop = got.get("stop") or []
    stops = [s.encode("utf-8") for s in ([stop] if isinstance(stop, str) else stop) if s]
    return Request(
        prompt=list(got["prompt"]),
        max_tokens=int(got["max_tokens"]),
        stops=stops,
        sampler=sampler,
        deadline=deadline,
    )


def late() -> ModelError:
    return ModelError(
        "the embedded model ran past this call's time limit and was stopped",
        "give the job more time (--max-seconds) or use a faster model",
    )


class BatchDecoder:
    """The worker that decodes every admitted request together (see the module doc)."""

    def __init__(self, llama: Any, *, slots: int, cells: int) -> None:
        import llama_cpp
        from llama_cpp import _internals

        self.llama = llama
        self.slots = slots
        self.cells = cells
        self._lib = llama_cpp
        # the sequential path's own settings (flash attention off, threads, RoPE …), so
        # that the two differ only in what batching needs
        params = llama_cpp.llama_context_params.from_buffer_copy(llama.context_params)
        params.n_ctx = cells
        params.n_batch = params.n_ubatch = BATCH_TOKENS
        params.n_seq_max = 2 * slots  # slots in flight, as many parked for their prefixes
        params.kv_unified = True  # one pool of cells: a copied prefix is shared, not copied
        self._ctx = _internals.LlamaContext(model=llama._model, params=params, verbose=False)
        self._memory = self._ctx.memory
        self._batch = llama_cpp.llama_batch_init(BATCH_TOKENS, 0, 1)
        self._vocab = llama._model.vocab
        self._in_batch: list[Request] = []
        self._abort = llama_cpp.ggml_abort_callback(self._all_late)
        llama_cpp.llama_set_abort_callback(self._ctx.ctx, self._abort, None)
        self._queue: deque[Request] = deque()
        self._active: list[Request] = []
        self._held: dict[int, list[int]] = {}  # seq id -> the tokens its cache entries hold
        self._parked: list[int] = []  # seq ids of ended requests, oldest first
        self._wake = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="reef-embedded", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ callers' side

    def submit(self, request: Request) -> Request:
        """Queue ``request``; ``request.wait()`` returns it finished (or failed). As with
        one sequence, an answer stops where the context ends (``max_tokens`` is cut)."""
        room = self.cells // self.slots
        if len(request.prompt) >= room:
            raise ModelError(
                f"the prompt ({len(request.prompt)} tokens) does not fit the embedded "
                f"model's context ({room} tokens)",
                "shorten the prompt",
            )
        request.max_tokens = max(1, min(request.max_tokens, room - len(request.prompt)))
        with self._wake:
            if self._closed:
                raise ModelError("the embedded model was closed", "start it again")
            self._queue.append(request)
            self._wake.notify()
        return request

    def close(self) -> None:
        """Stop the worker (requests still queued fail) and free the context."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join(timeout=30)
        if not self._thread.is_alive():
            self._lib.llama_batch_free(self._batch)
            self._ctx.close()

    # ------------------------------------------------------------------ the worker

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._closed and not self._queue and not self._active:
                    self._wake.wait()
                if self._closed:
                    closed = ModelError("the embedded model was closed", "start it again")
                    for request in [*self._queue, *self._active]:
                        self._fail(request, closed)
                    return
                self._admit()
            try:
                self._step()
            except Exception as exc:  # a decode that failed: every request in it fails
                log.exception("embedded batch decode failed")
                failed = ModelError(
                    f"the embedded model failed: {exc}",
                    "try again; with embedded_slots = 1 the calls take turns instead",
                )
                for request in list(self._active):
                    self._end(request, error=failed)

    def _reserved(self) -> int:
        return sum(len(r.prompt) + r.max_tokens for r in self._active)

    def _admit(self) -> None:
        """Move queued requests into slots, oldest first, while slots and cells allow."""
        while self._queue and len(self._active) < self.slots:
            request = self._queue[0]
            if request.cancelled or request.past_deadline():
                self._queue.popleft()
                self._fail(request, late() if not request.cancelled else None)
                continue
            if self._active and self._reserved() + len(request.prompt) + request.max_tokens > (
                self.cells
            ):
                return  # waits for room
            self._queue.popleft()
            self._start(request)
            self._active.append(request)

    def _free_seq(self) -> int:
        busy = {r.seq for r in self._active}
        for seq in range(2 * self.slots):
            if seq not in busy and seq not in self._held:
                return seq
        seq = self._parked.pop(0)  # the oldest parked prefix gives way
        self._forget(seq)
        return seq

    def _forget(self, seq: int) -> None:
        self._lib.llama_memory_seq_rm(self._memory, seq, -1, -1)
        self._held.pop(seq, None)

    def _start(self, request: Request) -> None:
        """Give ``request`` a sequence that starts from the longest cached prefix."""
        best, length = -1, 0
        limit = len(request.prompt) - 1  # the last prompt token is decoded for its logits
        for seq, tokens in self._held.items():
            common = _common_prefix(tokens, request.prompt, limit)
            if common > length:
                best, length = seq, common
        if best in self._parked:  # take over the parked sequence itself: nothing to copy
            self._parked.remove(best)
            seq = best
            self._lib.llama_memory_seq_rm(self._memory, seq, length, -1)
        else:
            seq = self._free_seq()
            if length:
                self._lib.llama_memory_seq_cp(self._memory, best, seq, 0, length)
        request.seq = seq
        request.fed = request.reused = length
        self._held[seq] = list(request.prompt[:length])

    def _step(self) -> None:
        """One decode: each generating request's last token, then prompt chunks."""
        self._drop_finished_early()
        if not self._active:
            return
        batch = self._batch
        batch.n_tokens = 0
        budget = BATCH_TOKENS - len(self._active)  # a token for each one generating
        for request in self._active:
            request.logits_at = -1
            if request.fed < len(request.prompt):
                take = min(budget, len(request.prompt) - request.fed)
                if take == 0:
                    continue
                budget -= take
                for i in range(request.fed, request.fed + take):
                    last = i == len(request.prompt) - 1
                    self._add(request, request.prompt[i], i, logits=last)
                request.fed += take
            else:
                position = len(request.prompt) + len(request.tokens) - 1
                self._add(request, request.tokens[-1], position, logits=True)
        self._in_batch = list(self._active)
        code = self._lib.llama_decode(self._ctx.ctx, batch)
        while code == 1 and self._parked:  # no room: parked prefixes give way, oldest first
            self._forget(self._parked.pop(0))
            code = self._lib.llama_decode(self._ctx.ctx, batch)
        self._in_batch = []
        if code == 2:  # aborted: every request in it was past its deadline
            for request in list(self._active):
                if request.past_deadline():
                    self._end(request, error=late())
            return
        if code != 0:
            raise RuntimeError(f"llama_decode returned {code}")
        for request in list(self._active):
            if request.logits_at >= 0:
                self._sample(request)

    def _add(self, request: Request, token: int, position: int, *, logits: bool) -> None:
        batch = self._batch
        i = batch.n_tokens
        batch.token[i] = token
        batch.pos[i] = position
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = request.seq
        batch.logits[i] = logits
        batch.n_tokens = i + 1
        if logits:
            request.logits_at = i
        self._held[request.seq].append(token)

    def _all_late(self, _data: Any) -> bool:
        in_batch = self._in_batch
        return bool(in_batch) and all(r.past_deadline() or r.cancelled for r in in_batch)

    def _sample(self, request: Request) -> None:
        """The request's next token, and whether that ends it (as create_completion ends)."""
        token = request.sampler.sample(self._ctx, request.logits_at)
        if self._lib.llama_vocab_is_eog(self._vocab, token):
            self._end(request, finish="stop")
            return
        request.tokens.append(token)
        raw = self.llama.detokenize(request.tokens, prev_tokens=request.prompt)
        stop = next((s for s in request.stops if s in raw), None)
        if stop is not None:
            self._end(request, finish="stop", raw=raw[: raw.index(stop)])
        elif len(request.tokens) >= request.max_tokens:
            self._end(request, finish="length", raw=raw)
        elif request.on_text is not None:
            self._stream(request, raw, final=False)

    def _stream(self, request: Request, raw: bytes, *, final: bool) -> None:
        """Give ``on_text`` the text that can no longer change: nothing that may be the
        start of a stop string; half a UTF-8 character waits for the rest of it."""
        assert request.on_text is not None
        keep = 0 if final else max((len(s) - 1 for s in request.stops), default=0)
        end = max(request.sent, len(raw) - keep)
        text = request.utf8.decode(raw[request.sent : end], final=final)
        request.sent = end
        if text:
            request.on_text(text)

    def _drop_finished_early(self) -> None:
        for request in list(self._active):
            if request.cancelled:
                self._end(request)
            elif request.past_deadline():
                self._end(request, error=late())

    def _end(
        self,
        request: Request,
        *,
        finish: str | None = None,
        raw: bytes | None = None,
        error: Exception | None = None,
    ) -> None:
        """Finish ``request``: its sequence is parked (its prefix stays for the next)."""
        if raw is None:
            raw = self.llama.detokenize(request.tokens, prev_tokens=request.prompt)
        if error is None and request.on_text is not None:
            self._stream(request, raw, final=True)
        request.text = raw.decode("utf-8", errors="ignore")
        request.finish = finish
        self._active.remove(request)
        # the cache holds the prompt and every token but the last sampled one
        held = self._held.get(request.seq, [])
        if error is not None or request.cancelled:
            self._forget(request.seq)
        else:
            self._held[request.seq] = held
            self._parked.append(request.seq)
        self._fail(request, error)

    def _fail(self, request: Request, error: Exception | None) -> None:
        request.error = error
        request.done.set()


def _common_prefix(a: list[int], b: list[int], limit: int) -> int:
    n = min(len(a), len(b), limit)
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i

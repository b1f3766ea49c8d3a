"""reefd's built-in inference engine: one torch model behind SGLang's HTTP contract.

OpenAI chat (streamed or not; non-streamed answers carry token ids, per-token logprobs
and the weight version) plus SGLang 0.5.23's weight-update endpoints, so the one engine
client and every weight sync drive this engine and SGLang alike. It runs where SGLang
cannot (CPU, CI, one small GPU) and serves one request at a time.

Threads: every use of the model — a generation, a weight update, a checksum — runs on
one worker thread, in arrival order, so an update waits for the generation in flight and
requests that arrive during an update queue behind it (none fails). The event loop only
parses, streams and waits, so ``/health`` answers while the model is busy. Joining a
weight-update group blocks until the trainer joins too, so it runs on a thread of its
own; the broadcast of an update is received on the worker, inside the update request.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import importlib
import inspect
import json
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from reef_cli.core.errors import ReefError
from reefd import models
from reefd._torch import require
from reefd.sync import buckets
from reefd.sync import group as groups

log = logging.getLogger("reefd.engine")

DEFAULT_MAX_TOKENS = 256
_PAUSED = object()  # a generation that found the engine paused: it waits and goes again


class BadRequest(Exception):
    """A request the engine cannot serve as asked (answered 400, OpenAI error shape)."""


@dataclass(frozen=True)
class Params:
    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    stop: tuple[str, ...]


@dataclass(frozen=True)
class Token:
    delta: str  # new text this token completed ("" while a UTF-8 sequence is open)
    id: int | None  # None: the final flush of held-back text
    text: str
    logprob: float


@dataclass(frozen=True)
class Generation:
    text: str
    ids: list[int]  # response ids, the stop token included when generation stopped on one
    tokens: list[str]
    logprobs: list[float]  # log pi(token) at temperature 1, one per id (what a trainer recomputes)
    finish: str  # stop | length | abort
    version: str  # the weights that produced it


def _pack_parameters(model: Any) -> None:
    """Move the model's weights into one flat buffer per dtype, in name order (the order a
    push cuts its buckets in): a bucket of adjacent names is then one span of it, and is
    broadcast straight into the weights, with no receive buffer and no copy. Tied weights
    (one tensor under two names) stay one tensor."""
    torch = require("torch")
    targets = models.param_map(model)
    unique: dict[int, tuple[str, Any]] = {}
    for name in sorted(targets):
        unique.setdefault(id(targets[name]), (name, targets[name]))
    packed = buckets.pack({name: tensor for name, tensor in unique.values()})
    with torch.no_grad():
        for name, tensor in unique.values():
            tensor.data = packed[name]


class Engine:
    """The model and everything that touches it; the app is a thin HTTP shell over it."""

    def __init__(
        self,
        loaded: models.Loaded,
        *,
        weight_version: str = "base",
        served_name: str | None = None,
        token_delay: float = 0.0,
        group_timeout: float = groups.DEFAULT_TIMEOUT,
    ) -> None:
        self.loaded = loaded
        self.model = loaded.model
        self.model.eval()
        self.model.requires_grad_(False)
        self.tokenizer = loaded.tokenizer
        self.served_name = served_name or loaded.name
        self.device = next(self.model.parameters()).device
        _pack_parameters(self.model)  # a weight push lands in them in place
        self.base_version = weight_version  # the full weights' version (no adapter)
        self.version = weight_version  # what requests are answered with now
        self.peft: Any = None  # the PeftModel wrapper while adapters are loaded
        self.adapters: dict[str, str] = {}  # lora name -> version, in load order
        self.groups: dict[str, groups.Group] = {}
        self.joining: set[str] = set()
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reefd-engine")
        self.generating = 0  # written on the worker only
        self.paused = False
        self.resumed = asyncio.Event()
        self.resumed.set()
        self.token_delay = token_delay
        self.group_timeout = group_timeout
        self.context = int(getattr(self.model.config, "max_position_embeddings", 2048) or 2048)
        self.stop_ids = self._stop_ids()
        # transformers renamed ``past_key_values`` to ``cache`` (5.2x); SGLang hosts pin older
        forward = inspect.signature(self.model.forward).parameters
        self.cache_arg = "cache" if "cache" in forward else "past_key_values"

    def _stop_ids(self) -> frozenset[int]:
        ids: set[int] = set()
        if self.tokenizer.eos_token_id is not None:
            ids.add(int(self.tokenizer.eos_token_id))
        config = getattr(self.model, "generation_config", None)
        eos = getattr(config, "eos_token_id", None)
        for value in eos if isinstance(eos, list) else [eos]:
            if isinstance(value, int):
                ids.add(value)
        vocab = self.tokenizer.get_vocab()
        ids.update(vocab[t] for t in (models.IM_END, models.EOT) if t in vocab)
        return frozenset(ids)

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn`` on the model's worker thread, after everything queued before it."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.worker, functools.partial(fn, *args))

    def close(self) -> None:
        for group in self.groups.values():
            group.destroy()
        self.groups.clear()
        self.worker.shutdown(wait=False, cancel_futures=True)

    # --- generation (worker thread) --------------------------------------------------------

    def generate(
        self,
        prompt: list[int],
        params: Params,
        emit: Callable[[Token], None] | None = None,
        stop: threading.Event | None = None,
    ) -> Any:
        """One completion of ``prompt``; ``_PAUSED`` when the engine is paused (the caller
        waits for /continue_generation and queues it again)."""
        if self.paused:
            return _PAUSED
        torch = require("torch")
        self.generating += 1
        try:
            with torch.inference_mode():
                return self._decode(torch, prompt, params, emit, stop or threading.Event())
        finally:
            self.generating -= 1

    def _decode(
        self,
        torch: Any,
        prompt: list[int],
        params: Params,
        emit: Callable[[Token], None] | None,
        stop: threading.Event,
    ) -> Generation:
        version = self.version
        rng = torch.Generator(device=self.device)
        seed = params.seed if params.seed is not None else int.from_bytes(os.urandom(7), "big")
        rng.manual_seed(seed)
        inputs = torch.tensor([prompt], device=self.device)
        past = None
        ids: list[int] = []
        tokens: list[str] = []
        logprobs: list[float] = []
        text, sent, finish = "", 0, "length"
        live = emit is not None or bool(params.stop)  # the text is needed as it grows
        for _ in range(params.max_tokens):
            if stop.is_set():
                finish = "abort"
                break
            out = self.model(input_ids=inputs, use_cache=True, **{self.cache_arg: past})
            past = getattr(out, self.cache_arg)
            logits = out.logits[0, -1].float()
            token = _sample(torch, logits, params, rng)
            logprob = float(torch.log_softmax(logits, dim=-1)[token])
            ids.append(token)
            tokens.append(self.tokenizer.decode([token]))
            logprobs.append(logprob)
            if token in self.stop_ids:
                finish = "stop"
            elif live:
                text = self.tokenizer.decode(ids, skip_special_tokens=True)
                cut = min(
                    (i for i in (text.find(s) for s in params.stop if s) if i >= 0), default=-1
                )
                if cut >= 0:
                    text, finish = text[:cut], "stop"
            # Streamed text holds back an open UTF-8 sequence and what may begin a stop string
            if finish == "stop":
                upto = len(text)
            elif text.endswith("\ufffd"):
                upto = sent
            else:
                upto = len(text) - _stop_prefix(text, params.stop)
            delta = ""
            if upto > sent:
                delta, sent = text[sent:upto], upto
            if emit is not None:
                emit(Token(delta, token, tokens[-1], logprob))
            if finish == "stop":
                break
            inputs = torch.tensor([[token]], device=self.device)
            if self.token_delay:
                time.sleep(self.token_delay)
        if not live:
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
        if emit is not None and len(text) > sent:
            emit(Token(text[sent:], None, "", 0.0))
        return Generation(text, ids, tokens, logprobs, finish, version)

    async def events(
        self, prompt: list[int], params: Params, *, tokens: bool
    ) -> AsyncGenerator[tuple[str, Any], None]:
        """``("token", Token)``… then ``("done", Generation)`` or ``("error", exc)``. Closing
        the iterator (a client that went away) stops the generation at its next token."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        stop = threading.Event()

        def put(item: tuple[str, Any]) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is gone: nobody listens any more
                stop.set()

        def emit(token: Token) -> None:
            put(("token", token))

        def job() -> None:
            try:
                result = self.generate(prompt, params, emit if tokens else None, stop)
            except Exception as exc:
                log.exception("reefd engine: generation failed")
                put(("error", exc))
                return
            put(("paused", None) if result is _PAUSED else ("done", result))

        try:
            while True:
                await self.resumed.wait()
                self.worker.submit(job)
                while True:
                    kind, value = await queue.get()
                    if kind == "paused":
                        break
                    yield kind, value
                    if kind != "token":
                        return
        finally:
            stop.set()

    # --- weights (worker thread) -----------------------------------------------------------

    def load_tensors(self, tensors: dict[str, Any], version: str | None) -> tuple[bool, str]:
        """Copy ``tensors`` into the served weights, all or nothing: an unknown name or a
        shape that does not match refuses the whole set."""
        torch = require("torch")
        targets = models.param_map(self.model)
        problems = []
        for name, tensor in tensors.items():
            target = targets.get(name)
            if target is None:
                problems.append(f"unknown tensor {name}")
            elif tuple(target.shape) != tuple(tensor.shape):
                problems.append(
                    f"{name} has shape {list(tensor.shape)}, the engine's is {list(target.shape)}"
                )
        if problems:
            more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
            return False, f"nothing loaded: {'; '.join(problems[:3])}{more}"
        with torch.no_grad():
            for name, tensor in tensors.items():
                targets[name].copy_(tensor)
        if version:
            self.version = self.base_version = str(version)
        return True, f"loaded {len(tensors)} tensors"

    def _in_place(self, specs: list[Any]) -> Any | None:
        """The weights' own bytes for this bucket, when every name exists with its shape
        and dtype and they lie back to back (``_pack_parameters``); else None."""
        targets = models.param_map(self.model)
        for spec in specs:
            target = targets.get(spec.name)
            if (
                target is None
                or tuple(target.shape) != tuple(spec.shape)
                or buckets.dtype_name(target.dtype) != spec.dtype
            ):
                return None
        return buckets.span(targets, specs)

    def loaded_in_place(self, specs: list[Any], version: str | None) -> tuple[bool, str]:
        if version:
            self.version = self.base_version = str(version)
        return True, f"loaded {len(specs)} tensors in place"

    def _receive_buffer(self, specs: list[Any]) -> Any:
        """A uint8 buffer of the bucket's size: a view of one buffer kept between buckets
        and updates, grown to the largest bucket seen (buckets differ in size, and a fresh
        allocation pays a page fault per 4 KiB). The worker copies it into the weights
        before it takes the next update, so one buffer is enough."""
        size = sum(spec.nbytes() for spec in specs)
        cached = getattr(self, "_buffer", None)
        if cached is None or cached.numel() < size:
            torch = require("torch")
            cached = self._buffer = torch.empty(size, dtype=torch.uint8, device=self.device)
        return cached[:size]

    def update_distributed(self, body: dict[str, Any]) -> tuple[bool, str]:
        name = str(body.get("group_name") or "")
        group = self.groups.get(name)
        if group is None:
            return False, f"no weight update group {name!r} (call /init_weights_update_group)"
        try:
            specs = buckets.specs_from_request(
                body.get("names") or [], body.get("dtypes") or [], body.get("shapes") or []
            )
        except (TypeError, ValueError) as exc:
            return False, f"bad update request: {exc}"
        load_format = body.get("load_format")
        try:
            if load_format == "flattened_bucket":
                in_place = self._in_place(specs)
                if in_place is not None:  # straight into the weights: nothing to copy
                    group.broadcast(in_place, src=0)
                    return self.loaded_in_place(specs, body.get("weight_version"))
                # Else into a buffer kept between updates, as bytes (SGLang's receiver is
                # uint8 too, and NCCL needs both ends to agree on dtype and count).
                flat = self._receive_buffer(specs)
                group.broadcast(flat, src=0)
                received = buckets.unflatten(flat.view(buckets.torch_dtype(specs[0].dtype)), specs)
            elif load_format in (None, "", "direct"):
                received = {}
                for spec in specs:
                    tensor = buckets.allocate([spec], self.device).view(spec.shape)
                    group.broadcast(tensor, src=0)
                    received[spec.name] = tensor
            else:
                return False, f"unknown load_format {load_format!r} (flattened_bucket or null)"
        except Exception as exc:  # a dtype we cannot allocate, a peer gone mid-broadcast
            return False, f"broadcast on {name!r} failed: {_first_line(exc)}"
        return self.load_tensors(received, body.get("weight_version"))

    def update_from_disk(self, body: dict[str, Any]) -> tuple[bool, str]:
        path = Path(str(body.get("model_path") or "")).expanduser()
        if path.is_file():
            files = [path]
        elif path.is_dir():
            files = [
                f for f in sorted(path.glob("*.safetensors")) if not f.name.startswith("adapter")
            ]
        else:
            files = []
        if not files:
            return False, f"no model safetensors at {path} (a dir with model.safetensors)"
        safetensors = require("safetensors.torch")
        tensors: dict[str, Any] = {}
        try:
            for file in files:
                tensors.update(safetensors.load_file(str(file), device="cpu"))
        except Exception as exc:
            return False, f"could not read {path}: {_first_line(exc)}"
        return self.load_tensors(tensors, body.get("weight_version"))

    def update_from_tensor(self, body: dict[str, Any]) -> tuple[bool, str]:
        serialized = body.get("serialized_named_tensors")
        if not isinstance(serialized, list) or not serialized:
            return False, "serialized_named_tensors must be a non-empty list"
        try:
            ipc = importlib.import_module("reefd.sync.ipc")
            tensors: dict[str, Any] = {}
            for item in serialized:
                for name, tensor in ipc.deserialize_named_tensors(item):
                    tensors[str(name)] = tensor
        except Exception as exc:
            return False, f"could not open the shared tensors: {_first_line(exc)}"
        return self.load_tensors(tensors, body.get("weight_version"))

    def load_lora(self, body: dict[str, Any]) -> tuple[bool, str]:
        name, path = body.get("lora_name"), body.get("lora_path")
        if not name or not path:
            return False, "lora_name and lora_path are required"
        name = str(name)
        if name in self.adapters:
            return False, f"LoRA adapter {name!r} is loaded already (unload it first)"
        if not (Path(str(path)) / "adapter_config.json").is_file():
            return False, f"no adapter_config.json in {path} (a peft adapter directory)"
        peft = require("peft")
        try:
            if self.peft is None:
                self.peft = peft.PeftModel.from_pretrained(
                    self.model, str(path), adapter_name=name, is_trainable=False
                )
            else:
                self.peft.load_adapter(str(path), adapter_name=name, is_trainable=False)
            self.peft.set_adapter(name)
        except Exception as exc:
            return False, f"could not load LoRA adapter {name!r}: {_first_line(exc)}"
        self.peft.eval()
        version = str(body.get("weight_version") or name)
        self.adapters[name] = version
        self.version = version
        return True, f"loaded LoRA adapter {name!r}"

    def unload_lora(self, body: dict[str, Any]) -> tuple[bool, str]:
        name = str(body.get("lora_name") or "")
        if name not in self.adapters:
            return False, f"no LoRA adapter {name!r} is loaded"
        del self.adapters[name]
        if not self.adapters:
            self.model = self.peft.unload()
            self.peft = None
            self.version = self.base_version
        else:
            self.peft.delete_adapter(name)
            last = next(reversed(self.adapters))
            self.peft.set_adapter(last)
            self.version = self.adapters[last]
        return True, f"unloaded LoRA adapter {name!r}"

    def checksum(self) -> str:
        return models.state_checksum(self.model)

    def weights_by_name(self, name: str, truncate: int) -> list[float] | None:
        state = (
            models.served_state_dict(self.model) if self.adapters else models.param_map(self.model)
        )
        tensor = state.get(name)
        if tensor is None:
            return None
        return [float(x) for x in tensor.detach().reshape(-1)[:truncate].float().cpu().tolist()]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _stop_prefix(text: str, stops: tuple[str, ...]) -> int:
    """Length of the longest end of ``text`` that is the start of a stop string."""
    return max((k for s in stops for k in range(1, len(s)) if text.endswith(s[:k])), default=0)


def _sample(torch: Any, logits: Any, params: Params, rng: Any) -> int:
    if params.temperature <= 0:
        return int(torch.argmax(logits))
    probs = torch.softmax(logits / params.temperature, dim=-1)
    if params.top_p < 1.0:
        ordered, order = torch.sort(probs, descending=True)
        keep = (torch.cumsum(ordered, dim=-1) - ordered) < params.top_p  # the first always
        ordered = ordered * keep
        pick = torch.multinomial(ordered / ordered.sum(), 1, generator=rng)
        return int(order[pick])
    return int(torch.multinomial(probs, 1, generator=rng))


# --- HTTP --------------------------------------------------------------------------------


def _params(body: dict[str, Any], prompt_len: int, context: int) -> Params:
    if int(body.get("n") or 1) != 1:
        raise BadRequest("n > 1 is not supported by reefd's torch engine")
    room = context - prompt_len
    if room <= 0:
        raise BadRequest(f"the prompt has {prompt_len} tokens; the context holds {context}")
    try:
        wanted = body.get("max_completion_tokens") or body.get("max_tokens") or DEFAULT_MAX_TOKENS
        max_tokens = min(int(wanted), room)
        temperature = float(1.0 if body.get("temperature") is None else body["temperature"])
        top_p = float(1.0 if body.get("top_p") is None else body["top_p"])
        seed = None if body.get("seed") is None else int(body["seed"])
    except (TypeError, ValueError) as exc:
        raise BadRequest(f"bad sampling parameter: {exc}") from None
    if max_tokens < 1:
        raise BadRequest("max_tokens must be at least 1")
    stop = body.get("stop")
    stops = (stop,) if isinstance(stop, str) else tuple(str(s) for s in stop or [])
    return Params(max_tokens, temperature, top_p, seed, stops)


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status)


def _update_route(
    engine: Engine, update: Callable[[dict[str, Any]], tuple[bool, str]]
) -> Callable[[Request], Awaitable[JSONResponse]]:
    """The handler of one weight-update endpoint: ``update`` with the request's body."""

    async def handle(request: Request) -> JSONResponse:
        body = await _body(request)
        ok, message = await engine.call(update, body)
        return _answer(ok, message, weight_version=engine.version)

    return handle


def _answer(ok: bool, message: str, **extra: Any) -> JSONResponse:
    """SGLang's shape: 200 on success, 400 with the same body when refused."""
    return JSONResponse({"success": ok, "message": message, **extra}, 200 if ok else 400)


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("the body is not JSON") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body


def _logprob_entries(tokens: list[str], logprobs: list[float]) -> list[dict[str, Any]]:
    return [
        {"token": t, "logprob": lp, "bytes": list(t.encode()), "top_logprobs": []}
        for t, lp in zip(tokens, logprobs, strict=True)
    ]


def create_engine_app(
    loaded: models.Loaded,
    *,
    weight_version: str = "base",
    served_name: str | None = None,
    token_delay: float = 0.0,
    group_timeout: float = groups.DEFAULT_TIMEOUT,
) -> FastAPI:
    """The engine as an ASGI app. ``token_delay`` (seconds per token) stands in for decode
    time on a fast machine, for tests and the swap-pause benchmark."""
    engine = Engine(
        loaded,
        weight_version=weight_version,
        served_name=served_name,
        token_delay=token_delay,
        group_timeout=group_timeout,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        engine.close()

    app = FastAPI(title="reefd torch engine", lifespan=lifespan)
    app.state.engine = engine

    @app.exception_handler(BadRequest)
    async def bad_request(request: Request, exc: BadRequest) -> JSONResponse:
        return _error(400, str(exc))

    # --- status ------------------------------------------------------------------------

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    def model_info() -> dict[str, Any]:
        return {
            "model_path": loaded.name,
            "tokenizer_path": loaded.name,
            "is_generation": True,
            "weight_version": engine.version,
            "served_model_name": engine.served_name,
            "kind": loaded.kind,
            "lora_adapters": list(engine.adapters),
        }

    def server_info() -> dict[str, Any]:
        return {
            **model_info(),
            "tp_size": 1,
            "dp_size": 1,
            "engine": "reefd-torch",
            "device": str(engine.device),
            "context_length": engine.context,
            "paused": engine.paused,
        }

    for path in ("/model_info", "/get_model_info"):
        app.get(path)(model_info)
    for path in ("/server_info", "/get_server_info"):
        app.get(path)(server_info)

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        entry = {"id": engine.served_name, "object": "model", "owned_by": "reefd"}
        return {"object": "list", "data": [entry]}

    # --- chat ----------------------------------------------------------------------------

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(request: Request) -> JSONResponse | StreamingResponse:
        body = await _body(request)
        messages = models.messages_of(body)
        if not messages:
            raise BadRequest("messages must be a non-empty list")
        try:
            prompt = models.prompt_ids(engine.tokenizer, messages)
        except Exception as exc:
            raise BadRequest(f"could not apply the chat template: {_first_line(exc)}") from None
        params = _params(body, len(prompt), engine.context)
        cid = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        if body.get("stream"):
            options = body.get("stream_options") or {}
            usage = bool(isinstance(options, dict) and options.get("include_usage"))
            stream = _stream(
                engine, prompt, params, cid, created, bool(body.get("logprobs")), usage
            )
            return StreamingResponse(stream, media_type="text/event-stream")
        result: Generation | None = None
        async with contextlib.aclosing(engine.events(prompt, params, tokens=False)) as events:
            async for kind, value in events:
                if kind == "error":
                    return _error(500, f"generation failed: {_first_line(value)}", "server_error")
                if kind == "done":
                    result = value
        if result is None:
            return _error(500, "generation ended without a result", "server_error")
        return JSONResponse(
            {
                "id": cid,
                "object": "chat.completion",
                "created": created,
                "model": engine.served_name,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": result.text},
                        "finish_reason": result.finish,
                        "logprobs": {"content": _logprob_entries(result.tokens, result.logprobs)},
                        "token_ids": result.ids,
                    }
                ],
                "prompt_token_ids": prompt,
                "usage": _usage(len(prompt), len(result.ids)),
                "metadata": {"weight_version": result.version},
            }
        )

    # --- weight updates ------------------------------------------------------------------

    @app.post("/init_weights_update_group")
    async def init_group(request: Request) -> JSONResponse:
        body = await _body(request)
        name = str(body.get("group_name") or "weight_update_group")
        if name in engine.groups or name in engine.joining:
            return _answer(False, f"weight update group {name!r} exists already")
        try:
            address = str(body["master_address"])
            port = int(body["master_port"])
            rank = int(body.get("rank_offset") or 0)  # + tp_rank, which is 0 here
            world = int(body["world_size"])
            backend = str(body.get("backend") or "gloo")
            timeout = float(body.get("timeout") or engine.group_timeout)
        except (KeyError, TypeError, ValueError) as exc:
            return _answer(False, f"bad init request: {_first_line(exc)}")
        engine.joining.add(name)
        try:
            group = await asyncio.to_thread(
                groups.join, backend, address, port, rank, world, name, timeout
            )
        except Exception as exc:
            return _answer(
                False, f"could not join {name!r} at {address}:{port}: {_first_line(exc)}"
            )
        finally:
            engine.joining.discard(name)
        engine.groups[name] = group
        return _answer(True, f"joined {name!r} as rank {rank} of {world}")

    # Each of these runs on the worker, after the generation in flight, and answers with
    # the version served afterwards.
    updates = {
        "/update_weights_from_distributed": engine.update_distributed,
        "/update_weights_from_disk": engine.update_from_disk,
        "/update_weights_from_tensor": engine.update_from_tensor,
        "/load_lora_adapter": engine.load_lora,
        "/unload_lora_adapter": engine.unload_lora,
    }
    for path, update in updates.items():
        app.add_api_route(path, _update_route(engine, update), methods=["POST"], name=path)

    @app.post("/destroy_weights_update_group")
    async def destroy_group(request: Request) -> JSONResponse:
        body = await _body(request)
        name = str(body.get("group_name") or "weight_update_group")
        group = engine.groups.pop(name, None)
        if group is None:
            return _answer(False, f"no weight update group {name!r}")
        await asyncio.to_thread(group.destroy)
        return _answer(True, f"destroyed {name!r}")

    @app.post("/weights_checker")
    async def weights_checker(request: Request) -> JSONResponse:
        body = await _body(request)
        action = body.get("action", "checksum")
        if action != "checksum":
            return _answer(False, f"unknown action {action!r} (checksum)")
        checksum = await engine.call(engine.checksum)
        return _answer(True, "ok", checksum=checksum, weight_version=engine.version)

    @app.post("/get_weights_by_name", response_model=None)
    async def weights_by_name(request: Request) -> Any:
        body = await _body(request)
        try:
            truncate = int(body.get("truncate_size") or 100)
        except (TypeError, ValueError):
            raise BadRequest("truncate_size must be an integer") from None
        values = await engine.call(engine.weights_by_name, str(body.get("name")), truncate)
        if values is None:
            return _answer(False, f"no tensor named {body.get('name')!r}")
        return values

    # --- scheduling ----------------------------------------------------------------------

    @app.api_route("/flush_cache", methods=["GET", "POST"])
    async def flush_cache() -> JSONResponse:
        # The torch engine keeps no cache across requests, so there is nothing to wait for
        # (SGLang answers 400 while it is busy; the client retries that).
        return _answer(True, "no prefix cache to flush")

    @app.post("/pause_generation")
    async def pause(request: Request) -> JSONResponse:
        body = await _body(request)
        engine.paused = True
        engine.resumed.clear()
        return _answer(True, f"paused ({body.get('mode') or 'in_place'}): new generations wait")

    @app.post("/continue_generation")
    async def resume() -> JSONResponse:
        engine.paused = False
        engine.resumed.set()
        return _answer(True, "generation continues")

    return app


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


async def _stream(
    engine: Engine,
    prompt: list[int],
    params: Params,
    cid: str,
    created: int,
    logprobs: bool,
    usage: bool,
) -> AsyncIterator[str]:
    def chunk(choices: list[dict[str, Any]], **extra: Any) -> str:
        data = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": engine.served_name,
            "choices": choices,
            **extra,
        }
        return f"data: {json.dumps(data)}\n\n"

    def choice(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        return {"index": 0, "delta": delta, "finish_reason": finish, **extra}

    yield chunk([choice({"role": "assistant", "content": ""})])
    # aclosing: a client that goes away stops the generation now, not when it is collected
    async with contextlib.aclosing(engine.events(prompt, params, tokens=True)) as events:
        async for kind, value in events:
            if kind == "token":
                token: Token = value
                entry: dict[str, Any] = {}
                if logprobs and token.id is not None:
                    content = _logprob_entries([token.text], [token.logprob])
                    entry = {"logprobs": {"content": content}}
                if token.delta or entry:
                    yield chunk([choice({"content": token.delta}, **entry)])
            elif kind == "error":
                error = {
                    "message": f"generation failed: {_first_line(value)}",
                    "type": "server_error",
                }
                yield f"data: {json.dumps({'error': error})}\n\n"
            else:
                result: Generation = value
                yield chunk([choice({}, result.finish)])
                if usage:
                    yield chunk([], usage=_usage(len(prompt), len(result.ids)))
    yield "data: [DONE]\n\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m reefd.engine.torch_server --model tiny --port 30000``."""
    parser = argparse.ArgumentParser(
        prog="python -m reefd.engine.torch_server",
        description="reefd's built-in torch engine: OpenAI chat + SGLang's weight updates",
    )
    parser.add_argument(
        "--model",
        default=models.TINY,
        help="tiny[:seed], smollm2, smollm2-sized or a Hugging Face checkpoint directory",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=models.DTYPES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--weight-version", default="base")
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--group-timeout", type=float, default=groups.DEFAULT_TIMEOUT)
    parser.add_argument("--token-delay", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        loaded = models.load(args.model, device=args.device, seed=args.seed, dtype=args.dtype)
    except ReefError as exc:
        print(f"reefd engine: {exc.one_line()}", file=sys.stderr, flush=True)
        return exc.exit_code
    app = create_engine_app(
        loaded,
        weight_version=args.weight_version,
        served_name=args.served_model_name,
        token_delay=args.token_delay,
        group_timeout=args.group_timeout,
    )
    import uvicorn

    print(f"reefd engine: serving {loaded.name} on http://{args.host}:{args.port}", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())

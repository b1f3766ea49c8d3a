"""A fake SGLang server: SGLang's weight-update endpoints, really joined and received.

``with FakeSGLang() as engine: engine.url`` serves on a free loopback port
(reef_cli.server.thread.ServerThread). It records every request (endpoint, JSON body)
in arrival order in ``calls``, and every step it takes in ``events``:
``("request", endpoint)``, ``("joined", rank)``, ``("received", n_bytes)``,
``("answer", endpoint, status)``, so a test sees that a broadcast was received inside
its update request. It behaves like SGLang 0.5.23 where reefd depends on it:

- ``/init_weights_update_group`` joins the gloo group (reefd.sync.group.join, as rank
  ``rank_offset + tp_rank`` for each of ``tp_size`` ranks) and answers once joined;
- ``/update_weights_from_distributed`` allocates the bucket (buckets.allocate), receives
  its broadcast as bytes (``flattened_bucket``) or one broadcast per tensor (``null``),
  and keeps what came in ``received`` (name -> tensor clone);
- ``/flush_cache`` answers 400 (plain text, like SGLang) the first ``flush_busy`` times;
- ``/update_weights_from_tensor``, ``/update_weights_from_disk``, ``/load_lora_adapter``
  read what the ipc, disk and lora syncs send.

Faults: ``fail_update_at=N`` makes the N-th update request (of any kind) fail; a
distributed one fails with ``fail_mode``:
``"refuse"`` (receives the broadcast, then ``success: false`` with 400, like an unknown
name), ``"error"`` (receives, then a 500 without JSON) or ``"break"`` (tears the group
down instead of receiving: the trainer's broadcast sees a closed connection); the
others refuse with ``success: false``. ``fail_init`` refuses the group.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from reef_cli.server.thread import ServerThread


@dataclass
class Call:
    endpoint: str
    body: dict[str, Any]
    at: float = field(default_factory=time.monotonic)


class FakeSGLang:
    def __init__(
        self,
        *,
        tp_size: int = 1,
        flush_busy: int = 0,
        fail_update_at: int | None = None,
        fail_mode: str = "refuse",
        fail_init: bool = False,
        names: Collection[str] | None = None,
        weight_version: str = "base",
        group_timeout: float = 20.0,
    ) -> None:
        import torch

        self.torch = torch
        self.tp_size = tp_size
        self.flush_busy = flush_busy
        self.fail_update_at = fail_update_at
        self.fail_mode = fail_mode
        self.fail_init = fail_init
        self.names = set(names) if names is not None else None
        self.weight_version = weight_version
        self.group_timeout = group_timeout
        self.calls: list[Call] = []
        self.events: list[tuple[Any, ...]] = []
        self.received: dict[str, Any] = {}
        self.adapters: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        self.groups: dict[str, list[Any]] = {}
        self.updates = 0
        self._lock = threading.Lock()
        self.app = self._build()
        self.server = ServerThread(self.app)
        # ServerThread's socket has proto 0, so asyncio never sets TCP_NODELAY on the
        # connections it accepts, and every answer waits 40 ms for a delayed ACK.
        # Accepted sockets inherit the option from the listening one on Linux.
        self.server.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        return self.server.url

    def __enter__(self) -> FakeSGLang:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
        for ranks in self.groups.values():
            for g in ranks:
                g.destroy()

    def endpoints(self) -> list[str]:
        return [call.endpoint for call in self.calls]

    def _next_update(self) -> bool:
        """Count an update request (any kind); True when it is the one to fail."""
        with self._lock:
            self.updates += 1
            return self.fail_update_at == self.updates

    def _event(self, *event: Any) -> None:
        with self._lock:
            self.events.append(event)

    # -- the app -----------------------------------------------------------------------

    def _build(self) -> FastAPI:
        app = FastAPI()
        torch = self.torch

        @app.middleware("http")
        async def record(request: Request, call_next: Any) -> Response:
            raw = await request.body()
            try:
                body = json.loads(raw) if raw else {}
            except json.JSONDecodeError:
                body = {"_raw": raw.decode(errors="replace")}
            with self._lock:
                self.calls.append(Call(request.url.path, body))
                self.events.append(("request", request.url.path))
            response = await call_next(request)
            self._event("answer", request.url.path, response.status_code)
            return response

        @app.get("/health")
        def health() -> Response:
            return Response(status_code=200)

        @app.get("/model_info")
        def model_info() -> dict[str, Any]:
            return {
                "model_path": "fake",
                "weight_version": self.weight_version,
                "is_generation": True,
            }

        @app.get("/server_info")
        def server_info() -> dict[str, Any]:
            return {"tp_size": self.tp_size, "weight_version": self.weight_version}

        @app.post("/init_weights_update_group")
        def init_group(body: dict[str, Any]) -> JSONResponse:
            from reefd.sync.group import join

            if self.fail_init:
                return _answer(False, "Failed to initialize custom process group: refused.")
            joined: list[Any] = [None] * self.tp_size
            errors: list[BaseException] = []

            def join_rank(tp_rank: int) -> None:
                rank = int(body["rank_offset"]) + tp_rank
                try:
                    joined[tp_rank] = join(
                        body["backend"],
                        body["master_address"],
                        int(body["master_port"]),
                        rank,
                        int(body["world_size"]),
                        body["group_name"],
                        self.group_timeout,
                    )
                    self._event("joined", rank)
                except Exception as exc:
                    errors.append(exc)

            _each_rank(self.tp_size, join_rank)
            if errors:
                return _answer(False, f"Failed to initialize custom process group: {errors[0]}.")
            self.groups[body["group_name"]] = joined
            return _answer(True, "Succeeded to initialize custom process group.")

        @app.post("/update_weights_from_distributed")
        def update_distributed(body: dict[str, Any]) -> Response:
            from reefd.sync import buckets

            failing = self._next_update()
            ranks = self.groups.get(body["group_name"])
            if ranks is None:
                return _answer(False, f"no group {body['group_name']!r}")
            specs = buckets.specs_from_request(body["names"], body["dtypes"], body["shapes"])
            if failing and self.fail_mode == "break":
                for g in ranks:
                    g.destroy()
                self.groups.pop(body["group_name"], None)
                return _answer(False, "Failed to update parameter online: connection lost.")
            got: dict[str, Any] = {}

            def receive(tp_rank: int) -> None:
                if body.get("load_format") == "flattened_bucket":
                    flat = buckets.allocate(specs)
                    ranks[tp_rank].broadcast(flat.view(torch.uint8), src=0)
                    if tp_rank == 0:
                        got.update(buckets.unflatten(flat, specs))
                else:
                    for spec in specs:
                        t = buckets.allocate([spec]).view(spec.shape)
                        ranks[tp_rank].broadcast(t, src=0)
                        if tp_rank == 0:
                            got[spec.name] = t

            _each_rank(len(ranks), receive)
            self._event("received", sum(s.nbytes() for s in specs))
            if failing and self.fail_mode == "error":
                return PlainTextResponse("Internal Server Error", status_code=500)
            if failing:
                return _answer(False, "Failed to update parameter online: refused (fault).")
            unknown = sorted(set(got) - self.names) if self.names is not None else []
            if unknown:
                return _answer(False, f"Failed to update parameter online: no {unknown[0]}.")
            with self._lock:
                self.received.update({k: v.clone() for k, v in got.items()})
                if body.get("weight_version") is not None:
                    self.weight_version = body["weight_version"]
            return _answer(True, "Succeeded to update parameter online.")

        @app.post("/destroy_weights_update_group")
        def destroy_group(body: dict[str, Any]) -> JSONResponse:
            ranks = self.groups.pop(body["group_name"], None)
            if ranks is None:
                return _answer(False, "The group to be destroyed does not exist.")
            for g in ranks:
                g.destroy()
            return _answer(True, "Succeeded to destroy custom process group.")

        @app.post("/update_weights_from_tensor")
        def update_tensor(body: dict[str, Any]) -> JSONResponse:
            from reefd.sync.ipc import deserialize_named_tensors

            named = deserialize_named_tensors(body["serialized_named_tensors"][0])
            if self._next_update():
                return _answer(False, "Failed to update model weights: refused (fault).")
            with self._lock:
                self.received.update({name: t.clone() for name, t in named})
                if body.get("weight_version") is not None:
                    self.weight_version = body["weight_version"]
            return _answer(True, "Succeeded to update model weights.")

        @app.post("/update_weights_from_disk")
        def update_disk(body: dict[str, Any]) -> JSONResponse:
            from safetensors.torch import load_file

            path = Path(body["model_path"]) / "model.safetensors"
            if self._next_update():
                return _answer(False, "Failed to update model weights: refused (fault).")
            if not path.exists():
                return _answer(False, f"Failed to get weights iterator: {path} not found.")
            with self._lock:
                self.received.update(load_file(str(path)))
                self.weight_version = body.get("weight_version") or self.weight_version
            return _answer(True, "Succeeded to update model weights.")

        @app.post("/load_lora_adapter")
        def load_lora(body: dict[str, Any]) -> JSONResponse:
            from safetensors.torch import load_file

            name, path = body["lora_name"], Path(body["lora_path"])
            if self._next_update():
                return _answer(False, "Failed to load LoRA adapter: refused (fault).")
            if name in self.adapters:
                return _answer(False, f"LoRA adapter {name} is already loaded.")
            config = json.loads((path / "adapter_config.json").read_text())
            self.adapters[name] = (load_file(str(path / "adapter_model.safetensors")), config)
            self.weight_version = body.get("weight_version") or name
            return _answer(True, "Succeeded to load LoRA adapter.")

        @app.post("/unload_lora_adapter")
        def unload_lora(body: dict[str, Any]) -> JSONResponse:
            if self.adapters.pop(body["lora_name"], None) is None:
                return _answer(False, f"LoRA adapter {body['lora_name']} is not loaded.")
            return _answer(True, "Succeeded to unload LoRA adapter.")

        @app.post("/flush_cache")
        def flush_cache() -> PlainTextResponse:
            with self._lock:
                busy = self.flush_busy > 0
                if busy:
                    self.flush_busy -= 1
            if busy:
                return PlainTextResponse(
                    "Cache not flushed. Please check backend logs for more details. "
                    "(When there are running or waiting requests, the operation will fail.)",
                    status_code=400,
                )
            return PlainTextResponse("Cache flushed.\nPlease check backend logs for more details.")

        @app.post("/weights_checker")
        def weights_checker(body: dict[str, Any]) -> JSONResponse:
            digest = hashlib.sha256()
            for name in sorted(self.received):
                t = self.received[name]
                digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
                digest.update(t.contiguous().view(torch.uint8).numpy().tobytes())
            return JSONResponse({"success": True, "checksum": digest.hexdigest()})

        @app.post("/get_weights_by_name")
        def get_weights(body: dict[str, Any]) -> Response:
            t = self.received.get(body["name"])
            if t is None:
                return _answer(False, f"no parameter {body['name']}")
            values = t.reshape(-1)[: int(body.get("truncate_size", 100))].float().tolist()
            return JSONResponse(values)

        @app.post("/pause_generation")
        def pause(body: dict[str, Any]) -> JSONResponse:
            return _answer(True, "Generation paused.")

        @app.post("/continue_generation")
        def resume(body: dict[str, Any]) -> JSONResponse:
            return _answer(True, "Generation continued.")

        return app


def _answer(success: bool, message: str) -> JSONResponse:
    return JSONResponse(
        {"success": success, "message": message}, status_code=200 if success else 400
    )


def _each_rank(n: int, fn: Any) -> None:
    """Run ``fn(tp_rank)`` for every rank at once, as SGLang's TP workers do."""
    threads = [threading.Thread(target=fn, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

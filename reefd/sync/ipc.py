"""Weights by handle: the tensors stay where they are, the engine maps them (``ipc`` sync).

What SGLang's ``/update_weights_from_tensor`` takes: base64 of a ForkingPickler dump of
``[(name, tensor), ...]``. A CUDA tensor pickles as a CUDA IPC handle (the engine on the
same GPU opens it, no copy through the host). A CPU tensor pickles with torch's
``file_system`` sharing strategy, as the name of a shared-memory file: the default
``file_descriptor`` strategy passes a descriptor, which cannot travel in an HTTP body.
Each bucket is copied once into one shared buffer and sent as views of it, so the
caller's tensors are never moved into shared memory behind its back.

``deserialize_named_tensors`` is the engine's end: it unpickles only torch's rebuild
functions and types, so a request body cannot run code.
"""

from __future__ import annotations

import base64
import binascii
import io
import pickle
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reefd._torch import require
from reefd.sync.base import SyncStats, attempt, flush
from reefd.sync.buckets import DEFAULT_BUCKET_BYTES, TensorSpec, plan, spec_of, unflatten

_STRATEGY = threading.Lock()


def serialize_named_tensors(named: Iterable[tuple[str, Any]] | Mapping[str, Any]) -> str:
    """``[(name, tensor)]`` -> the string SGLang's ``serialized_named_tensors`` holds.

    A CPU tensor not yet in shared memory is moved there in place (pass copies, or
    shared tensors); keep the tensors alive until the engine has answered."""
    require("torch.multiprocessing")  # registers torch's reducers on ForkingPickler
    from multiprocessing.reduction import ForkingPickler

    mp = require("torch.multiprocessing")
    items = list(named.items()) if isinstance(named, Mapping) else list(named)
    buffer = io.BytesIO()
    with _STRATEGY:
        previous = mp.get_sharing_strategy()
        mp.set_sharing_strategy("file_system")
        try:
            ForkingPickler(buffer, pickle.HIGHEST_PROTOCOL).dump(items)
        finally:
            mp.set_sharing_strategy(previous)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def deserialize_named_tensors(serialized: str | bytes) -> list[tuple[str, Any]]:
    """The engine's end: the ``[(name, tensor)]`` list, mapped from the sender's memory."""
    require("torch.multiprocessing")
    try:
        data = base64.b64decode(serialized, validate=True)
        items = _TorchOnly(io.BytesIO(data)).load()
    except (binascii.Error, ValueError, pickle.UnpicklingError, EOFError) as exc:
        raise ValueError(f"not a serialized tensor list: {exc}") from None
    if not isinstance(items, list) or not all(
        isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) for item in items
    ):
        raise ValueError("serialized tensors must be a list of (name, tensor) pairs")
    return items


class _TorchOnly(pickle.Unpickler):
    """Resolves only what a tensor handle pickle names (torch's rebuild functions,
    storages, dtypes, Size, Tensor/Parameter)."""

    def find_class(self, module: str, name: str) -> Any:
        torch = require()
        allowed = (
            (module == "torch.multiprocessing.reductions" and name.startswith("rebuild_"))
            or (module == "torch._utils" and name.startswith("_rebuild"))
            or (module == "torch.storage" and name in ("UntypedStorage", "TypedStorage"))
            or (module == "torch.nn.parameter" and name == "Parameter")
            or (module in ("torch", "torch.cuda") and name.endswith("Storage"))
            or (module == "torch" and name in ("Tensor", "Size"))
            or (module == "torch" and isinstance(getattr(torch, name, None), torch.dtype))
            or (module == "collections" and name == "OrderedDict")
        )
        if not allowed:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a tensor handle")
        return super().find_class(module, name)


def shared_bucket(
    tensors: Mapping[str, Any], bucket: Sequence[TensorSpec]
) -> list[tuple[str, Any]]:
    """The bucket copied into one buffer the engine can map, as ``(name, view)`` pairs:
    shared memory for CPU tensors, the tensors' own GPU for CUDA ones."""
    torch = require()
    mp = require("torch.multiprocessing")
    parts = [tensors[spec.name].detach().reshape(-1) for spec in bucket]
    device = parts[0].device
    total = sum(spec.numel for spec in bucket)
    if device.type == "cpu":
        with _STRATEGY:
            previous = mp.get_sharing_strategy()
            mp.set_sharing_strategy("file_system")
            try:
                flat = torch.empty(total, dtype=parts[0].dtype).share_memory_()
            finally:
                mp.set_sharing_strategy(previous)
    else:
        flat = torch.empty(total, dtype=parts[0].dtype, device=device)
    torch.cat(parts, out=flat)
    views = unflatten(flat, bucket)
    return [(spec.name, views[spec.name]) for spec in bucket]


class IpcSync:
    """Push by handle: one ``/update_weights_from_tensor`` per bucket, the version and
    ``flush_cache`` on the last, then the cache flush. The engine must share the host
    (CPU tensors) or the GPU (CUDA tensors)."""

    mode = "ipc"

    def __init__(self, client: Any, *, bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> None:
        self.client = client
        self.bucket_bytes = bucket_bytes
        self._ranks: int | None = None

    def push(self, tensors: Mapping[str, Any], version: str) -> SyncStats:
        with attempt(self.mode, version, tensors) as push:
            buckets = plan([spec_of(n, t) for n, t in tensors.items()], self.bucket_bytes)
            if self._ranks is None:
                self._ranks = max(1, int(self.client.server_info().get("tp_size") or 1))
            for index, bucket in enumerate(buckets):
                named = shared_bucket(tensors, bucket)
                serialized = serialize_named_tensors(named)
                last = index == len(buckets) - 1
                push.reached = True
                # The buffer (``named``) stays alive until the engine has copied it.
                self.client.update_weights_from_tensor(
                    [serialized] * self._ranks, version if last else None, flush_cache=last
                )
                del named
        flush(self.client)
        return push.stats(sum(s.nbytes() for bucket in buckets for s in bucket), len(buckets))

    def close(self) -> None:
        """Nothing held between pushes."""

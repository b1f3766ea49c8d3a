"""Weights by broadcast (``dist`` sync): the trainer is rank 0 of a group with the engine.

The same code runs over gloo (CPU tensors, CI; or CUDA tensors) and NCCL (one GPU per
rank). The order is SGLang's, and every engine request that waits on a collective is
sent from a thread while this thread runs the collective:

1. first push only: ``/init_weights_update_group`` (in a thread) while the trainer joins
   as rank 0 of ``1 + tp_size`` ranks (the engine's ranks follow it);
2. ``/pause_generation``: no generation may run on half-updated weights between buckets
   (they wait; ``/continue_generation`` follows the push, however it ends);
3. per bucket: ``/update_weights_from_distributed`` (in a thread) naming the bucket's
   tensors, then the broadcast of the bucket as one flat tensor; the request returns
   when the engine has loaded it. The weight version and ``flush_cache: true`` ride on
   the last bucket (overlapping a bucket's staging with the engine's copy of the one
   before was measured slower on a 2-core host: both copies fight for the cores);
4. ``/continue_generation``, then ``/flush_cache``, retried while the engine answers 400;
5. at ``close()``: ``/destroy_weights_update_group``.

A flat bucket travels as bytes (a uint8 view of the flat tensor): that is how SGLang's
receiver allocates it (``FlattenedTensorBucket`` is uint8, any dtype mix), and NCCL wants
the same dtype and count on every rank.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reef_cli.core.errors import EngineError
from reefd._torch import require
from reefd.sync import group as groups
from reefd.sync.base import SyncStats, attempt, flush, reason
from reefd.sync.buckets import DEFAULT_BUCKET_BYTES, TensorSpec, flatten, plan, span, spec_of

log = logging.getLogger(__name__)
GROUP_NAME = "reef-weights"
# How long a failed push waits for its engine request to come back, for its message.
_SETTLE = 5.0


class _Background:
    """One call in a daemon thread; ``wait`` returns its result or raises its error."""

    def __init__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(fn, args, kwargs), daemon=True)
        self.thread.start()

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        try:
            self.result = fn(*args, **kwargs)
        except BaseException as exc:
            self.error = exc

    @property
    def done(self) -> bool:
        return not self.thread.is_alive()

    def wait(self, timeout: float, what: str) -> Any:
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise EngineError(f"engine {what} did not return within {timeout:g} s")
        if self.error is not None:
            raise self.error
        return self.result


def _resume(client: Any) -> None:
    """Generation continues after a push, whatever happened to it (a resume that fails
    leaves the engine paused: said loudly, since requests would wait)."""
    try:
        client.continue_generation()
    except EngineError as exc:
        log.error("engine generation not resumed after a weight push: %s", exc.message)


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class DistSync:
    """Push by broadcast; connects on the first push and keeps the group until close."""

    mode = "dist"

    def __init__(
        self,
        client: Any,
        *,
        backend: str = "gloo",
        bucket_bytes: int = DEFAULT_BUCKET_BYTES,
        master_address: str = "127.0.0.1",
        group_name: str = GROUP_NAME,
        timeout: float = groups.DEFAULT_TIMEOUT,
        load_format: str | None = "flattened_bucket",
    ) -> None:
        if backend not in ("gloo", "nccl"):
            raise ValueError(f"unknown weight-sync backend {backend!r} (use gloo or nccl)")
        self.client = client
        self.backend = backend
        self.bucket_bytes = bucket_bytes
        self.master_address = master_address
        self.base_name = group_name
        self.group_name = group_name  # this connection's: base, base-2, base-3, ...
        self.timeout = timeout
        self.load_format = load_format
        self._group: groups.Group | None = None
        self._staging: Any = None
        self._connections = 0

    @property
    def connected(self) -> bool:
        return self._group is not None

    def connect(self) -> None:
        """Form the group with the engine (done by the first push); EngineError if not."""
        if self._group is not None:
            return
        ranks = max(1, int(self.client.server_info().get("tp_size") or 1))
        world = 1 + ranks
        port = free_port(self.master_address)
        # A new name per connection: an engine that still holds the last group (its
        # destroy request was lost in a failure) refuses a second group of that name.
        self._connections += 1
        n = self._connections
        self.group_name = self.base_name if n == 1 else f"{self.base_name}-{n}"
        init = _Background(
            self.client.init_weights_update_group,
            self.master_address,
            port,
            1,
            world,
            self.group_name,
            self.backend,
        )
        joining = _Background(
            groups.join,
            self.backend,
            self.master_address,
            port,
            0,
            world,
            self.group_name,
            self.timeout,
        )
        # An engine that refuses answers at once; do not sit out the join timeout.
        deadline = time.monotonic() + self.timeout + _SETTLE
        while not joining.done and time.monotonic() < deadline:
            if init.done and init.error is not None:
                break
            joining.thread.join(0.02)
        try:
            if init.done and init.error is not None:
                raise init.error
            if not joining.done:
                raise EngineError(f"no engine rank joined within {self.timeout:g} s")
            group = joining.wait(0, "weight-update group join")
        except Exception as exc:
            if joining.done and joining.error is None:
                joining.result.destroy()
            raise EngineError(
                f"engine at {self.client.base_url} did not join the weight-update group "
                f"({self.backend}, {world} ranks, {self.master_address}:{port}): {reason(exc)}",
                "the engine must reach this host at master_address (set it to an address "
                "the engine can connect to)",
            ) from exc
        try:
            init.wait(self.timeout, "/init_weights_update_group")
        except Exception as exc:
            group.destroy()
            raise EngineError(
                f"engine /init_weights_update_group failed after joining: {reason(exc)}"
            ) from exc
        self._group = group

    def push(self, tensors: Mapping[str, Any], version: str) -> SyncStats:
        with attempt(self.mode, version, tensors) as push:
            buckets = plan([spec_of(n, t) for n, t in tensors.items()], self.bucket_bytes)
            self.connect()
            self.client.pause_generation()
            try:
                for index, bucket in enumerate(buckets):
                    last = index == len(buckets) - 1
                    push.reached = True
                    self._send(tensors, bucket, version if last else None)
            except Exception:
                _resume(self.client)
                if push.reached:
                    self._drop()
                raise
        _resume(self.client)
        flush(self.client)
        return push.stats(sum(s.nbytes() for b in buckets for s in b), len(buckets))

    def _send(
        self, tensors: Mapping[str, Any], bucket: Sequence[TensorSpec], version: str | None
    ) -> None:
        """One bucket: its update request in a thread, then its broadcast; ``version`` (the
        last bucket's) is what the engine serves once it has loaded it."""
        payload = self._payload(tensors, bucket)
        request = _Background(
            self.client.update_weights_from_distributed,
            [spec.name for spec in bucket],
            [spec.dtype for spec in bucket],
            [list(spec.shape) for spec in bucket],
            group_name=self.group_name,
            weight_version=version,
            flush_cache=version is not None,
            load_format=self.load_format,
        )
        try:
            for tensor in payload:
                self._group_now().broadcast(tensor)
        except Exception:
            # The engine's answer, when it comes, says more than the broken pipe.
            request.thread.join(_SETTLE)
            if request.done and request.error is not None:
                raise request.error from None
            raise
        request.wait(self.client.timeout + _SETTLE, "/update_weights_from_distributed")

    def _group_now(self) -> groups.Group:
        if self._group is None:
            raise EngineError("the weight-update group is gone")
        return self._group

    def _payload(self, tensors: Mapping[str, Any], bucket: Sequence[TensorSpec]) -> list[Any]:
        """What is broadcast for ``bucket``: one uint8 flat tensor, or (load_format None)
        each tensor whole, in bucket order."""
        torch = require()
        parts = [tensors[spec.name].detach() for spec in bucket]
        device = (
            torch.device("cuda", torch.cuda.current_device()) if self.backend == "nccl" else None
        )
        if self.load_format != "flattened_bucket":
            return [p.contiguous() if device is None else p.to(device).contiguous() for p in parts]
        if device is None or parts[0].device == device:
            packed = span(tensors, bucket)  # packed weights (buckets.pack): no copy at all
            if packed is not None:
                return [packed]
        if len(parts) == 1 and (device is None or parts[0].device == device):
            return [flatten(tensors, bucket).view(torch.uint8)]  # a view when contiguous
        return [self._stage(parts, bucket, device or parts[0].device)]

    def _stage(self, parts: list[Any], bucket: Sequence[TensorSpec], device: Any) -> Any:
        """The bucket copied into one staging buffer, kept between buckets and pushes: a
        fresh buffer per bucket costs its page faults on every push (CPU), which is most
        of what a push adds to the broadcast. Reusing it is safe because each broadcast
        has completed (gloo) or is ordered on the stream (NCCL) before the next copy."""
        torch = require()
        nbytes = sum(spec.nbytes() for spec in bucket)
        staging = self._staging
        if staging is None or staging.device != device or staging.numel() < nbytes:
            self._staging = None
            staging = self._staging = torch.empty(
                max(nbytes, min(self.bucket_bytes, 1 << 30)), dtype=torch.uint8, device=device
            )
        out = staging[:nbytes].view(parts[0].dtype)
        offset = 0
        for part in parts:
            n = part.numel()
            out[offset : offset + n].copy_(part.reshape(-1))
            offset += n
        return staging[:nbytes]

    def _drop(self) -> None:
        """After a failure: tear down our end first (an engine stuck in a broadcast gets a
        closed connection and answers), then ask the engine to drop its end."""
        group, self._group = self._group, None
        if group is None:
            return
        group.destroy()
        try:
            self.client.destroy_weights_update_group(self.group_name)
        except EngineError as exc:
            log.warning("weight-update group not destroyed on the engine: %s", exc.message)

    def close(self) -> None:
        self._staging = None
        group, self._group = self._group, None
        if group is None:
            return
        try:
            self.client.destroy_weights_update_group(self.group_name)
        except EngineError as exc:
            log.warning("weight-update group not destroyed on the engine: %s", exc.message)
        finally:
            group.destroy()

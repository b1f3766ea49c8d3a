"""A weight-update process group: the trainer is rank 0, the engine's ranks follow.

The group is created the way SGLang's ``init_custom_process_group`` creates its side (a
``tcp://`` rendezvous store, prefixed by the group name, then the backend on a second
``<group_name>/`` prefix), so a trainer can join a real SGLang engine and reefd's torch
engine alike. It is a group of its own, not torch's default group, so one process can
hold several over its life (one per engine start) and nothing else in it is touched.
``gloo`` runs on CPU tensors (CI) and CUDA tensors; ``nccl`` needs one GPU per rank.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from reefd._torch import require

DEFAULT_TIMEOUT = 120.0


@dataclass
class Group:
    backend: str
    rank: int
    world_size: int
    name: str
    _pg: Any
    _store: Any

    def broadcast(self, tensor: Any, src: int = 0) -> None:
        """Send (rank ``src``) or receive into ``tensor`` (every other rank), in place."""
        self._pg.broadcast([tensor], _options(src)).wait()

    def destroy(self) -> None:
        shutdown = getattr(self._pg, "shutdown", None)
        if callable(shutdown):
            # A peer that is gone already: nothing left to release.
            with contextlib.suppress(Exception):
                shutdown()
        self._pg = None


def _options(src: int) -> Any:
    dist = require("torch.distributed")
    opts = dist.BroadcastOptions()
    opts.rootRank = src
    opts.rootTensor = 0
    return opts


def join(
    backend: str,
    master_address: str,
    master_port: int,
    rank: int,
    world_size: int,
    group_name: str,
    timeout: float = DEFAULT_TIMEOUT,
) -> Group:
    """Join (rank 0: create) the group; blocks until all ``world_size`` ranks have joined."""
    dist = require("torch.distributed")
    wait = timedelta(seconds=timeout)
    store = dist.TCPStore(
        master_address,
        int(master_port),
        world_size,
        is_master=rank == 0,
        timeout=wait,
        wait_for_workers=False,
    )
    named = dist.PrefixStore(group_name, store)
    backend_store = dist.PrefixStore(f"{group_name}/", named)
    if backend == "gloo":
        pg = dist.ProcessGroupGloo(backend_store, rank, world_size, wait)
    elif backend == "nccl":
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = wait
        pg = dist.ProcessGroupNCCL(backend_store, rank, world_size, options)
    else:
        raise ValueError(f"unknown weight-sync backend {backend!r} (use gloo or nccl)")
    # No collective here: SGLang's side runs none after joining, so one on ours would be
    # matched against its first bucket. Gloo connects every rank in its constructor; NCCL
    # forms its communicator on the first broadcast.
    return Group(backend, rank, world_size, group_name, pg, store)

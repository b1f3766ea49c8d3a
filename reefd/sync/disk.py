"""Weights by file (``disk`` sync): a safetensors file the engine loads by path.

The slowest way and the one that needs nothing shared with the engine but a directory:
``work_dir/<version>/model.safetensors`` (the full state dict, engine names), then
``/update_weights_from_disk``. Only the last pushed version's directory is kept.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reefd._torch import require
from reefd.sync.base import SyncStats, attempt, flush, total_bytes, version_dir

WEIGHTS_FILE = "model.safetensors"


def savable(tensors: Mapping[str, Any]) -> dict[str, Any]:
    """CPU, contiguous tensors that share no storage: what safetensors writes (tied
    weights, e.g. embeddings and lm_head, are two tensors on one storage)."""
    seen: set[int] = set()
    out: dict[str, Any] = {}
    for name, tensor in tensors.items():
        t = tensor.detach().to("cpu").contiguous()
        ptr = t.untyped_storage().data_ptr()
        if ptr in seen or t.untyped_storage().nbytes() != t.numel() * t.element_size():
            t = t.clone()
        seen.add(t.untyped_storage().data_ptr())
        out[name] = t
    return out


def write_safetensors(tensors: Mapping[str, Any], path: Path) -> None:
    """Write atomically (a reader never sees half a file)."""
    st = require("safetensors.torch")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    st.save_file(savable(tensors), str(partial), metadata={"format": "pt"})
    os.replace(partial, path)


class DiskSync:
    mode = "disk"

    def __init__(self, client: Any, *, work_dir: Path) -> None:
        self.client = client
        self.work_dir = Path(work_dir)
        self._current: Path | None = None

    def push(self, tensors: Mapping[str, Any], version: str) -> SyncStats:
        with attempt(self.mode, version, tensors) as push:
            target = version_dir(self.work_dir, version)
            write_safetensors(tensors, target / WEIGHTS_FILE)
            push.reached = True
            self.client.update_weights_from_disk(str(target), version)
        flush(self.client)
        previous, self._current = self._current, target
        if previous is not None and previous != target:
            shutil.rmtree(previous, ignore_errors=True)
        return push.stats(total_bytes(tensors), 1)

    def close(self) -> None:
        """The last pushed file stays: the engine may reload it."""

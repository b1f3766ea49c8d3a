"""``make_sync``: the one place that picks a weight sync by ``mode``, from one table.

Kept apart from ``base`` so the shared parts import no implementation (each of
``dist``, ``ipc``, ``disk``, ``lora`` imports ``base``); the implementations load only
when their mode is asked for (``dist`` and ``ipc`` need torch).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reef_cli.core.errors import ConfigError
from reefd.sync.base import WeightSync
from reefd.sync.buckets import DEFAULT_BUCKET_BYTES
from reefd.sync.group import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from reefd.engine.client import EngineClient


@dataclass(frozen=True)
class SyncOptions:
    """What a sync may need besides the engine: ``make_sync``'s keyword arguments."""

    backend: str = "gloo"
    bucket_bytes: int = DEFAULT_BUCKET_BYTES
    work_dir: Path | str | None = None
    master_address: str = "127.0.0.1"
    lora_config: Mapping[str, Any] | None = None
    timeout: float = DEFAULT_TIMEOUT

    def folder(self, mode: str) -> Path:
        if self.work_dir is None:
            raise ConfigError(f"weight sync {mode!r} needs a work directory for its files")
        return Path(self.work_dir)


def _dist(client: EngineClient, o: SyncOptions) -> WeightSync:
    from reefd.sync.dist import DistSync

    return DistSync(
        client,
        backend=o.backend,
        bucket_bytes=o.bucket_bytes,
        master_address=o.master_address,
        timeout=o.timeout,
    )


def _ipc(client: EngineClient, o: SyncOptions) -> WeightSync:
    from reefd.sync.ipc import IpcSync

    return IpcSync(client, bucket_bytes=o.bucket_bytes)


def _disk(client: EngineClient, o: SyncOptions) -> WeightSync:
    from reefd.sync.disk import DiskSync

    return DiskSync(client, work_dir=o.folder("disk"))


def _lora(client: EngineClient, o: SyncOptions) -> WeightSync:
    from reefd.sync.lora import LoraSync

    return LoraSync(client, work_dir=o.folder("lora"), lora_config=o.lora_config)


# Every weight sync mode and how it is built (each implementation is imported only when
# its mode is asked for: dist and ipc need torch). A new sync is its module and one row;
# reefd.yaml's ``sync.mode`` names the same modes (a test checks they agree).
SYNCS: dict[str, Callable[[EngineClient, SyncOptions], WeightSync]] = {
    "dist": _dist,
    "ipc": _ipc,
    "disk": _disk,
    "lora": _lora,
}
MODES: tuple[str, ...] = tuple(SYNCS)


def make_sync(
    mode: str,
    client: EngineClient,
    *,
    backend: str = "gloo",
    bucket_bytes: int = DEFAULT_BUCKET_BYTES,
    work_dir: Path | str | None = None,
    master_address: str = "127.0.0.1",
    lora_config: Mapping[str, Any] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> WeightSync:
    """The sync for ``mode``; disk and lora need ``work_dir`` (where the files go)."""
    build = SYNCS.get(mode)
    if build is None:
        raise ConfigError(f"unknown weight sync mode {mode!r}", f"use one of {', '.join(MODES)}")
    options = SyncOptions(backend, bucket_bytes, work_dir, master_address, lora_config, timeout)
    return build(client, options)

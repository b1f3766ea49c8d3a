"""``make_sync``: the one place that picks a weight sync by ``mode``.

Kept apart from ``base`` so the shared parts import no implementation (each of
``dist``, ``ipc``, ``disk``, ``lora`` imports ``base``); the implementations load only
when their mode is asked for (``dist`` and ``ipc`` need torch).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reef_cli.core.errors import ConfigError
from reefd.sync.base import MODES, WeightSync
from reefd.sync.buckets import DEFAULT_BUCKET_BYTES
from reefd.sync.group import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from reefd.engine.client import EngineClient


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
    if mode == "dist":
        from reefd.sync.dist import DistSync

        return DistSync(
            client,
            backend=backend,
            bucket_bytes=bucket_bytes,
            master_address=master_address,
            timeout=timeout,
        )
    if mode == "ipc":
        from reefd.sync.ipc import IpcSync

        return IpcSync(client, bucket_bytes=bucket_bytes)
    if mode in ("disk", "lora"):
        if work_dir is None:
            raise ConfigError(f"weight sync {mode!r} needs a work directory for its files")
        if mode == "disk":
            from reefd.sync.disk import DiskSync

            return DiskSync(client, work_dir=Path(work_dir))
        from reefd.sync.lora import LoraSync

        return LoraSync(client, work_dir=Path(work_dir), lora_config=lora_config)
    raise ConfigError(f"unknown weight sync mode {mode!r}", f"use one of {', '.join(MODES)}")

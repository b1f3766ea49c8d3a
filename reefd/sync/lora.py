"""Weights as an adapter (``lora`` sync): a peft adapter directory the engine loads.

``work_dir/<version>/adapter_model.safetensors`` (the adapter's state dict, peft names)
and ``adapter_config.json`` (the peft LoraConfig as a dict), then
``/load_lora_adapter {lora_name: <version>}``; the adapter loaded before is unloaded
after the new one is in, so the engine always serves one. Only the last pushed version's
directory is kept.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reef_cli.core.errors import ConfigError, EngineError
from reefd.sync.base import SyncStats, attempt, total_bytes, version_dir
from reefd.sync.disk import write_safetensors

log = logging.getLogger(__name__)
ADAPTER_FILE = "adapter_model.safetensors"
CONFIG_FILE = "adapter_config.json"


def write_adapter(
    tensors: Mapping[str, Any], lora_config: Mapping[str, Any], directory: Path
) -> Path:
    """A directory peft's ``PeftModel.from_pretrained`` (and SGLang) can load."""
    config = dict(lora_config)
    config.setdefault("peft_type", "LORA")
    directory.mkdir(parents=True, exist_ok=True)
    write_safetensors(tensors, directory / ADAPTER_FILE)
    (directory / CONFIG_FILE).write_text(json.dumps(config, indent=2, sort_keys=True, default=str))
    return directory


class LoraSync:
    mode = "lora"

    def __init__(
        self, client: Any, *, work_dir: Path, lora_config: Mapping[str, Any] | None = None
    ) -> None:
        self.client = client
        self.work_dir = Path(work_dir)
        self.lora_config = dict(lora_config) if lora_config is not None else None
        self._loaded: str | None = None

    def push(self, tensors: Mapping[str, Any], version: str) -> SyncStats:
        with attempt(self.mode, version, tensors) as push:
            if self.lora_config is None:
                raise ConfigError("lora sync needs the adapter's lora_config")
            target = write_adapter(tensors, self.lora_config, version_dir(self.work_dir, version))
            push.reached = True
            if self._loaded == version:  # the same name again: the engine refuses duplicates
                self.client.unload_lora_adapter(version)
                self._loaded = None
            self.client.load_lora_adapter(version, str(target))
        previous, self._loaded = self._loaded, version
        if previous is not None:
            try:
                self.client.unload_lora_adapter(previous)
            except EngineError as exc:  # the new adapter serves; the old one only takes room
                log.warning("adapter %s not unloaded: %s", previous, exc.message)
            shutil.rmtree(version_dir(self.work_dir, previous), ignore_errors=True)
        return push.stats(total_bytes(tensors), 1)

    def close(self) -> None:
        """The adapter stays loaded: it is what the engine serves."""

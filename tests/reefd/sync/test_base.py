"""make_sync: the mode names and what each needs."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from reef_cli.core.errors import ConfigError
from reefd.engine.client import EngineClient
from reefd.sync.base import SyncStats
from reefd.sync.factory import make_sync


def test_modes(tmp_path: Path) -> None:
    client = EngineClient("http://127.0.0.1:9")
    assert make_sync("dist", client).mode == "dist"
    assert make_sync("dist", client, backend="nccl").backend == "nccl"  # type: ignore[attr-defined]
    assert make_sync("ipc", client).mode == "ipc"
    assert make_sync("disk", client, work_dir=tmp_path).mode == "disk"
    assert make_sync("lora", client, work_dir=tmp_path, lora_config={"r": 8}).mode == "lora"
    with pytest.raises(ConfigError, match="work directory"):
        make_sync("disk", client)
    with pytest.raises(ConfigError, match="unknown weight sync mode 'nfs'") as caught:
        make_sync("nfs", client)
    assert caught.value.hint == "use one of dist, ipc, disk, lora"


def test_stats_rate() -> None:
    assert SyncStats("dist", 2_000_000_000, 2.0, 3).gb_per_s == 1.0
    assert SyncStats("dist", 1, 0.0, 1).gb_per_s == 0.0


def test_reefd_yaml_names_the_modes_the_table_builds() -> None:
    from typing import get_args

    from reefd.daemon_config import SyncConfig
    from reefd.sync.factory import MODES

    assert get_args(SyncConfig.model_fields["mode"].annotation) == MODES

"""Slime: the command line reefd builds for it, and the install it names when missing."""

from __future__ import annotations

import pytest

from reef_cli.core.errors import ConfigError, ExtraMissing
from reefd.trainers import slime
from reefd.trainers.slime import SLIME_COMMIT, SlimeTrainer, engine_addr, slime_argv


def _value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_argv_points_slime_at_the_external_engine() -> None:
    argv = slime_argv(
        ["http://127.0.0.1:30000/", "http://10.0.0.2:30001"],
        hf_checkpoint="/models/smollm2",
        slime_root="/root/slime",
        actor_num_gpus_per_node=2,
    )
    assert argv[:2] == ["python3", "/root/slime/train.py"]
    i = argv.index("--rollout-external-engine-addrs")
    assert argv[i + 1 : i + 3] == ["127.0.0.1:30000", "10.0.0.2:30001"]
    assert "--rollout-external" not in argv  # gone from Slime since e1b9c90 (2026-06-04)
    assert _value(argv, "--update-weight-mode") == "full"
    assert _value(argv, "--update-weight-transport") == "nccl"
    assert _value(argv, "--hf-checkpoint") == "/models/smollm2"
    assert _value(argv, "--actor-num-gpus-per-node") == "2"
    assert _value(argv, "--eps-clip") == "0.2"
    assert _value(argv, "--eps-clip-high") == "0.28"
    assert _value(argv, "--kl-loss-coef") == "0.02"
    assert _value(argv, "--kl-loss-type") == "k3"
    assert "--use-kl-loss" in argv
    assert "--colocate" not in argv


def test_argv_options() -> None:
    argv = slime_argv(
        ["127.0.0.1:30000"],
        hf_checkpoint="/m",
        legacy_external_flag=True,
        colocate=True,
        extra_args=["--advantage-estimator", "reinforce_plus_plus"],
    )
    i = argv.index("--rollout-external")
    assert argv[i + 1] == "--rollout-external-engine-addrs"
    assert "--colocate" in argv
    assert argv[-2:] == ["--advantage-estimator", "reinforce_plus_plus"]
    disk = slime_argv(
        ["http://h:1"],
        hf_checkpoint="/m",
        update_weight_mode="delta",
        update_weight_transport="disk",
        disk_dir="/shared/w",
        local_checkpoint_dir="/nvme/ckpt",
    )
    assert _value(disk, "--update-weight-mode") == "delta"
    assert _value(disk, "--update-weight-disk-dir") == "/shared/w"
    assert _value(disk, "--update-weight-local-checkpoint-dir") == "/nvme/ckpt"
    sparse = slime_argv(["http://h:1"], hf_checkpoint="/m", update_weight_mode="sparse")
    assert _value(sparse, "--update-weight-mode") == "sparse"


@pytest.mark.parametrize(
    "options",
    [
        {"update_weight_mode": "half"},
        {"update_weight_transport": "ipc"},
        {"update_weight_mode": "delta", "update_weight_transport": "nccl"},
        {"update_weight_mode": "delta", "update_weight_transport": "disk", "disk_dir": "/d"},
        {"update_weight_mode": "sparse", "update_weight_transport": "disk", "disk_dir": "/d"},
        {"update_weight_mode": "sparse", "colocate": True},
        {"update_weight_transport": "disk"},
    ],
)
def test_argv_refuses_what_slime_would(options: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        slime_argv(["http://h:1"], hf_checkpoint="/m", **options)  # type: ignore[arg-type]


def test_engine_addr() -> None:
    assert engine_addr("http://localhost:8000/v1") == "localhost:8000"
    assert engine_addr("10.1.2.3:9") == "10.1.2.3:9"
    assert engine_addr("http://[::1]:7000") == "[::1]:7000"
    with pytest.raises(ConfigError):
        engine_addr("http://nohost")
    with pytest.raises(ConfigError):
        slime_argv([], hf_checkpoint="/m")


def test_without_slime_the_error_names_the_source_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(slime, "slime_installed", lambda: False)
    with pytest.raises(ExtraMissing) as caught:
        SlimeTrainer(engine_url="http://127.0.0.1:30000")
    hint = caught.value.hint or ""
    assert "not on PyPI" in hint
    assert "github.com/THUDM/slime" in hint and SLIME_COMMIT in hint
    assert "slimerl/slime" in hint


def test_the_guard_is_real_where_slime_is_missing() -> None:
    if slime.slime_installed():
        pytest.skip("Slime is installed here")
    with pytest.raises(ExtraMissing):
        SlimeTrainer(engine_url="http://127.0.0.1:30000", hf_checkpoint="/m")

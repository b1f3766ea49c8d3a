"""``reefd.yaml``: what `reefd start` runs — an engine, Reef's proxy in front of it, a weight
recipe, a trainer, a weight-sync path and the gate's task set.

Every key has a default that runs on a CPU laptop (the tiny random-init model, the torch
engine, SAO, LoRA, gloo); a GPU workstation changes ``engine`` and ``sync``::

    scenario: default
    engine: {kind: torch, model: tiny, device: cpu}      # or kind: sglang / url: (attach)
    serve: {host: 127.0.0.1, port: 8910}
    recipe: {name: sao, batch_size: 8, max_staleness: 2}    # or openclaw_rl, sft (no staleness)
    trainer: {kind: torch, mode: lora, lr: 1.0e-4}
    sync: {mode: dist, backend: gloo}                    # dist | ipc | disk | lora
    gate: {tasks: tasks.yaml}                            # required: a step alone is no pass

A wrong key or value is one ``ConfigError`` line that names the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from reef_cli.core import yaml_config
from reef_cli.core.errors import ConfigError


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EngineConfig(_Section):
    kind: Literal["torch", "sglang"] = "torch"
    model: str = Field("tiny", description="tiny | smollm2 | a local checkpoint directory")
    url: str | None = Field(None, description="attach to a running engine instead of launching")
    host: str = "127.0.0.1"
    port: int = Field(0, ge=0, le=65535, description="0: a free port")
    device: str = "cpu"
    seed: int = 0
    args: list[str] = Field(default_factory=list, description="extra sglang.launch_server flags")


class ServeSection(_Section):
    host: str = "127.0.0.1"
    port: int = Field(8910, ge=0, le=65535)
    open: bool = Field(False, description="no token (loopback only), as `reef serve --open`")


class RecipeConfig(_Section):
    name: Literal["sao", "openclaw_rl", "sft"] = "sao"
    batch_size: int = Field(8, ge=1, le=100_000)
    max_staleness: int | None = Field(
        None,
        ge=0,
        le=1000,
        description="weight versions a record may lag (default: sao and openclaw_rl 2; sft "
        "any, an accepted answer is a demonstration whichever weights or model wrote it)",
    )
    judge: str | None = Field(None, description="openclaw_rl's judge model (LiteLLM string)")
    judge_api_base: str | None = None
    votes: int = Field(3, ge=1, le=15)
    baseline_decay: float = Field(0.9, ge=0, lt=1)
    threshold: float = Field(
        1.0, gt=0, le=1, description="sft: the lowest report score that accepts an answer"
    )


class TrainerConfig(_Section):
    kind: Literal["torch", "slime"] = "torch"
    mode: Literal["lora", "full"] = "lora"
    lr: float = Field(1e-4, gt=0, le=1)
    lora_r: int = Field(8, ge=1, le=256)
    epochs: int = Field(1, ge=1, le=100)
    seed: int = 0


class SyncConfig(_Section):
    mode: Literal["dist", "ipc", "disk", "lora"] = "dist"
    backend: Literal["gloo", "nccl"] = "gloo"
    bucket_mb: int = Field(256, ge=1, le=16_384)
    master_address: str = "127.0.0.1"


class GateConfig(_Section):
    tasks: Path = Field(description="the task set the gate evaluates on (its test split)")
    max_tokens: int = Field(64, ge=1, le=4096, description="answer length on gate tasks")
    judge: str | None = Field(None, description="model for `judge` scorers (LiteLLM string)")
    judge_api_base: str | None = None


class ReefdConfig(_Section):
    scenario: str = "default"
    engine: EngineConfig = Field(default_factory=EngineConfig)
    serve: ServeSection = Field(default_factory=ServeSection)
    recipe: RecipeConfig = Field(default_factory=RecipeConfig)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    sync: SyncConfig = Field(default_factory=SyncConfig)
    gate: GateConfig
    poll_s: float = Field(1.0, gt=0, le=3600, description="seconds between training checks")

    @model_validator(mode="after")
    def _compatible(self) -> ReefdConfig:
        if self.sync.mode == "lora" and self.trainer.mode != "lora":
            raise ValueError("sync.mode lora needs trainer.mode lora")
        if self.recipe.name == "openclaw_rl" and not self.recipe.judge:
            raise ValueError("recipe openclaw_rl needs recipe.judge (a model for its votes)")
        return self


def load(path: Path) -> ReefdConfig:
    """Read and validate ``reefd.yaml``; relative paths inside are relative to the file.
    A bad file is one ``ConfigError`` line (the shared loader, ``core/yaml_config.py``)."""
    data = yaml_config.load_mapping(
        path,
        error=ConfigError,
        fix="pass a readable YAML file to -c (docs/reefd.md lists the keys)",
    )
    config = parse(data)
    tasks = config.gate.tasks
    if not tasks.is_absolute():
        config.gate.tasks = (path.parent / tasks).resolve()
    return config


def parse(data: dict[str, Any]) -> ReefdConfig:
    return yaml_config.validate(
        ReefdConfig,
        data,
        error=ConfigError,
        what="reefd.yaml",
        fix="docs/reefd.md lists the keys and their values",
    )

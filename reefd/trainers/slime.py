"""Slime as reefd's trainer on GPU clusters (Ray + Megatron), pointed at reefd's engine.

Slime is not on PyPI (PyPI's ``slime`` is another project): it is installed from source
at a pinned commit, in its image (``slimerl/slime``: patched SGLang, Megatron-LM, Ray).
Constructing ``SlimeTrainer`` without it raises ``ExtraMissing`` with that install.
Slime runs its own training loop and pushes weights into the engine itself
(``--rollout-external-engine-addrs``: it attaches to the engine reefd serves instead of
launching its own), so this module builds that command line (``slime_argv``, pure) and
starts it; reefd's in-process round (step, gate, restore) is the torch trainer's.
"""

from __future__ import annotations

import importlib.util
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from reef_cli.core.errors import ConfigError, ExtraMissing

SLIME_REPO = "https://github.com/THUDM/slime"
# The commit reefd's flags were checked against. Before e1b9c90 (2026-06-04) Slime also
# wanted a bare --rollout-external flag; from then on the address list alone says it.
SLIME_COMMIT = "624b824a898ab0ec1fcb4d373004c7f3852bf515"
INSTALL = (
    f"Slime is not on PyPI (PyPI's 'slime' is another project): run reefd in the "
    f"slimerl/slime image, or install it from source with its patched SGLang, Megatron-LM "
    f"and Ray: git clone {SLIME_REPO} && git -C slime checkout {SLIME_COMMIT} && "
    f"pip install -e slime --no-deps (docs/reefd.md)"
)
UPDATE_MODES = ("full", "delta", "sparse")
TRANSPORTS = ("nccl", "disk")


def slime_installed() -> bool:
    """THUDM's Slime (not PyPI's unrelated ``slime``): its argument module is importable."""
    try:
        return importlib.util.find_spec("slime.utils.arguments") is not None
    except (ImportError, ValueError):
        return False


def engine_addr(url: str) -> str:
    """``http://127.0.0.1:30000/`` -> ``127.0.0.1:30000`` (Slime wants host:port)."""
    parts = urlsplit(url if "//" in url else f"//{url}")
    if not parts.hostname or parts.port is None:
        raise ConfigError(
            f"not an engine address with a port: {url!r}", "give the engine as http://host:port"
        )
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{parts.port}"


def slime_argv(
    engine_urls: Sequence[str],
    *,
    hf_checkpoint: str,
    slime_root: str | Path = "/root/slime",
    script: str = "train.py",
    python: str = "python3",
    update_weight_mode: str = "full",
    update_weight_transport: str = "nccl",
    colocate: bool = False,
    disk_dir: str | None = None,
    local_checkpoint_dir: str | None = None,
    actor_num_nodes: int = 1,
    actor_num_gpus_per_node: int = 1,
    lr: float = 1e-6,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    kl_beta: float = 0.02,
    rollout_function_path: str | None = None,
    legacy_external_flag: bool = False,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The command that runs Slime's train script against reefd's engine(s).

    Checks what Slime itself would refuse: ``delta`` needs the disk transport, a local
    checkpoint dir and no ``--colocate``; ``sparse`` needs nccl and no ``--colocate``;
    the disk transport needs a shared ``disk_dir``."""
    if not engine_urls:
        raise ConfigError("Slime needs at least one engine address", "start or attach an engine")
    if update_weight_mode not in UPDATE_MODES:
        raise ConfigError(
            f"unknown Slime update-weight mode {update_weight_mode!r}",
            f"one of: {', '.join(UPDATE_MODES)}",
        )
    if update_weight_transport not in TRANSPORTS:
        raise ConfigError(
            f"unknown Slime update-weight transport {update_weight_transport!r}",
            f"one of: {', '.join(TRANSPORTS)}",
        )
    if update_weight_mode == "delta":
        if update_weight_transport != "disk":
            raise ConfigError("Slime's delta mode needs the disk transport", "transport: disk")
        if not local_checkpoint_dir:
            raise ConfigError(
                "Slime's delta mode needs a local checkpoint directory",
                "set local_checkpoint_dir (host-local disk holding a full HF checkpoint)",
            )
    if update_weight_mode == "sparse" and update_weight_transport != "nccl":
        raise ConfigError("Slime's sparse mode needs the nccl transport", "transport: nccl")
    if colocate and update_weight_mode != "full":
        raise ConfigError(
            f"Slime's {update_weight_mode} mode does not work with --colocate",
            "use update-weight mode full when colocated",
        )
    if update_weight_transport == "disk" and not disk_dir:
        raise ConfigError(
            "Slime's disk transport needs a directory the trainer and engines share",
            "set disk_dir",
        )
    argv = [
        python,
        str(Path(slime_root) / script),
        "--hf-checkpoint",
        hf_checkpoint,
        "--actor-num-nodes",
        str(actor_num_nodes),
        "--actor-num-gpus-per-node",
        str(actor_num_gpus_per_node),
    ]
    if legacy_external_flag:
        argv.append("--rollout-external")
    argv += ["--rollout-external-engine-addrs", *(engine_addr(u) for u in engine_urls)]
    argv += [
        "--update-weight-mode",
        update_weight_mode,
        "--update-weight-transport",
        update_weight_transport,
    ]
    if disk_dir:
        argv += ["--update-weight-disk-dir", disk_dir]
    if local_checkpoint_dir:
        argv += ["--update-weight-local-checkpoint-dir", local_checkpoint_dir]
    if colocate:
        argv.append("--colocate")
    argv += [
        "--lr",
        repr(float(lr)),
        "--eps-clip",
        repr(float(clip_low)),
        "--eps-clip-high",
        repr(float(clip_high)),
        "--use-kl-loss",
        "--kl-loss-coef",
        repr(float(kl_beta)),
        "--kl-loss-type",
        "k3",
    ]
    if rollout_function_path:
        argv += ["--rollout-function-path", rollout_function_path]
    return argv + list(extra_args)


class SlimeTrainer:
    """Slime's training process against reefd's engine (see the module docstring)."""

    def __init__(
        self,
        engine_url: str,
        *,
        hf_checkpoint: str | None = None,
        slime_root: str | Path | None = None,
        **options: Any,
    ) -> None:
        if not slime_installed():
            raise ExtraMissing("trainer.kind slime needs Slime, which is not installed", INSTALL)
        self.engine_url = engine_url
        self.slime_root = Path(slime_root) if slime_root else _source_root()
        if hf_checkpoint is None:
            raise ConfigError(
                "the Slime trainer needs the engine's Hugging Face checkpoint",
                "pass hf_checkpoint (the directory the engine serves)",
            )
        self.argv = slime_argv(
            [engine_url], hf_checkpoint=hf_checkpoint, slime_root=self.slime_root, **options
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def launch(self, log: IO[bytes] | None = None) -> subprocess.Popen[bytes]:
        """Start Slime (it attaches to the engine and trains until stopped)."""
        self.proc = subprocess.Popen(
            self.argv, cwd=self.slime_root, stdout=log, stderr=subprocess.STDOUT if log else None
        )
        return self.proc

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)

    def _own_loop(self, *_: Any, **__: Any) -> Any:
        raise ConfigError(
            "the Slime trainer runs Slime's own loop; reefd's round needs the torch trainer",
            "set trainer.kind: torch, or run Slime with SlimeTrainer.launch()",
        )

    step = snapshot = restore = served_weights = adapter = load_weights = generate = _own_loop


def _source_root() -> Path:
    """The Slime checkout (the train scripts sit next to the ``slime`` package)."""
    spec = importlib.util.find_spec("slime")
    origin = spec.origin if spec is not None else None
    if not origin:
        raise ExtraMissing("cannot find Slime's source checkout", INSTALL)
    return Path(origin).resolve().parent.parent

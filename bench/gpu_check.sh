#!/usr/bin/env bash
# reefd on one GPU, end to end, in under 4 minutes, with no network: build a random-init
# SmolLM2-sized model, serve it on CUDA with reefd's torch engine (or SGLang: --sglang),
# run one LoRA training step, push the new weights once over `ipc` (CUDA IPC) and once
# over `dist` (gloo, CUDA tensors, two processes), check the engine's checksum changed
# and its weight_version advanced, and print the timings. With two or more GPUs it also
# pushes over NCCL into a second engine on the second GPU.
#
#   bash bench/gpu_check.sh [--device cuda|cpu] [--model smollm2-sized|tiny] [--sglang]
#                           [--wheels DIR] [--timeout SECONDS] [--help]
#
# Uses the host's python (PYTHON, else python3) and its torch (>= 2.11 on CUDA); nothing
# is downloaded. Missing pure-Python packages can come as wheels: --wheels DIR installs
# DIR/*.whl with `pip --no-index --no-deps` into a temporary directory first.
# `--device cpu --model tiny` is a dry run of the same steps on a machine without a GPU.
# Exit codes: 0 every check passed; 1 a check failed; 2 something is missing; 3 no CUDA.
set -euo pipefail

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
DEVICE=cuda
MODEL=smollm2-sized
SGLANG=0
WHEELS=""
TIMEOUT=240
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --device) DEVICE="${2:?--device needs cuda or cpu}"; shift 2 ;;
    --model) MODEL="${2:?--model needs a spec}"; shift 2 ;;
    --sglang) SGLANG=1; shift ;;
    --wheels) WHEELS="${2:?--wheels needs a directory}"; shift 2 ;;
    --timeout) TIMEOUT="${2:?--timeout needs seconds}"; shift 2 ;;
    *) echo "gpu_check: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$DEVICE" in cuda|cpu) ;; *) echo "gpu_check: --device is cuda or cpu, not $DEVICE" >&2; exit 2 ;; esac
command -v "$PY" >/dev/null || { echo "gpu_check: no python ($PY); set PYTHON=/path/to/python" >&2; exit 2; }

WORK="$(mktemp -d -t reef-gpu-check-XXXXXX)"
SITE=""
if [[ -n "$WHEELS" ]]; then
  shopt -s nullglob
  wheels=("$WHEELS"/*.whl)
  [[ ${#wheels[@]} -gt 0 ]] || { echo "gpu_check: no wheels in $WHEELS" >&2; exit 2; }
  "$PY" -m pip install -q --no-index --no-deps --target "$WORK/site" "${wheels[@]}" \
    || { echo "gpu_check: pip could not install the wheels in $WHEELS" >&2; exit 2; }
  SITE=":$WORK/site"
fi
export PYTHONPATH="$ROOT$SITE${PYTHONPATH:+:$PYTHONPATH}"
cd "$ROOT"
export GPU_CHECK_DEVICE="$DEVICE" GPU_CHECK_MODEL="$MODEL" GPU_CHECK_SGLANG="$SGLANG" \
  GPU_CHECK_WORK="$WORK" PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false

set +e
timeout --signal=TERM --kill-after=20 "$TIMEOUT" "$PY" - <<'PY'
"""The check itself (python, run by bench/gpu_check.sh)."""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DEVICE = os.environ["GPU_CHECK_DEVICE"]
MODEL = os.environ["GPU_CHECK_MODEL"]
SGLANG = os.environ["GPU_CHECK_SGLANG"] == "1"
WORK = Path(os.environ["GPU_CHECK_WORK"])
NEEDED = (
    "torch",
    "transformers",
    "peft",
    "safetensors",
    "fastapi",
    "uvicorn",
    "httpx",
    "reefd.engine.torch_server",
    "reefd.engine.launch",
    "reefd.trainers.torch_trainer",
    "reefd.sync.dist",
    "reefd.sync.ipc",
)
ROWS: list[tuple[str, float, str]] = []


class CheckFailed(Exception):
    pass


def say(line: str) -> None:
    print(f"gpu_check: {line}", flush=True)


def stop(code: int, line: str) -> None:
    say(line)
    sys.exit(code)


def check(ok: bool, what: str) -> None:
    if not ok:
        raise CheckFailed(what)


@contextlib.contextmanager
def timed(what: str, note: str = "") -> Iterator[list[str]]:
    notes = [note] if note else []
    start = time.perf_counter()
    yield notes
    ROWS.append((what, time.perf_counter() - start, "; ".join(n for n in notes if n)))
    say(f"{what}: {ROWS[-1][1]:.2f} s {ROWS[-1][2]}".rstrip())


def preflight() -> Any:
    missing: list[str] = []
    for name in NEEDED:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            missing.append(exc.name or name)
        except Exception as exc:  # present but broken: name it, one line
            missing.append(f"{name} ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})")
    if missing:
        names = ", ".join(dict.fromkeys(missing))
        stop(2, f"missing python packages: {names} (install them, or pass --wheels DIR)")
    import torch

    if DEVICE == "cuda":
        if not torch.cuda.is_available():
            stop(
                3,
                f"CUDA is not available (torch {torch.__version__}): run on a GPU host, "
                "or --device cpu --model tiny for a dry run",
            )
        major, minor = (int(x) for x in torch.__version__.split(".")[:2])
        if (major, minor) < (2, 11):
            stop(2, f"torch {torch.__version__} is too old: the check needs torch >= 2.11")
    if SGLANG:
        from reefd.engine.launch import sglang_available

        if not sglang_available():
            stop(2, "--sglang: sglang is not installed in this python")
    return torch


def samples_for(tokenizer: Any) -> list[Any]:
    from reefd import models
    from reefd.weight_recipes.base import Sample

    out = []
    for i, (ask, answer, advantage) in enumerate(
        [
            ("Name a colour.", "Blue, like the sea.", 1.0),
            ("Name a number.", "Seven hundred and two.", -1.0),
        ]
    ):
        prompt = models.prompt_ids(tokenizer, [{"role": "user", "content": ask}])
        response = tokenizer(answer, add_special_tokens=False)["input_ids"]
        out.append(Sample(f"r{i}", prompt, list(response), advantage))
    return out


def engine_checksum(client: Any) -> str | None:
    from reef_cli.core.errors import EngineError

    try:
        return client.checksum()
    except EngineError as exc:
        if not SGLANG:
            raise
        say(f"no checksum from SGLang ({exc.message}); comparing weight_version only")
        return None


def launch(device: str, log: Path, gpu: int = 0) -> Any:
    from reefd.engine.launch import launch_sglang, launch_torch

    if not SGLANG:
        return launch_torch(MODEL, device=device, seed=0, log_path=log, timeout=180)
    model_dir = WORK / "model"
    extra = ["--disable-cuda-graph", "--mem-fraction-static", "0.4", "--base-gpu-id", str(gpu)]
    return launch_sglang(str(model_dir), extra_args=extra, log_path=log, timeout=180)


def main() -> None:
    torch = preflight()
    from reef_cli.core.errors import ReefError
    from reefd import models
    from reefd.engine.client import EngineClient
    from reefd.sync.dist import DistSync
    from reefd.sync.ipc import IpcSync
    from reefd.trainers.torch_trainer import TorchTrainer

    device = "cuda:0" if DEVICE == "cuda" else "cpu"
    gpus = torch.cuda.device_count() if DEVICE == "cuda" else 0
    engine = second = None
    say(
        f"torch {torch.__version__}, device {device}"
        + (f" ({torch.cuda.get_device_name(0)}, {gpus} GPU(s))" if gpus else "")
        + f", model {MODEL}, engine {'sglang' if SGLANG else 'reefd torch'}"
    )
    try:
        with timed("build the model (random init)"):
            loaded = models.load(MODEL, device=device, seed=0)
            base_sum = models.state_checksum(loaded.model)
            if SGLANG:
                loaded.model.save_pretrained(WORK / "model")
                loaded.tokenizer.save_pretrained(WORK / "model")
        with timed("start the engine") as notes:
            engine = launch(device, WORK / "engine.log")
            notes.append(engine.url)
        client = EngineClient(engine.url, timeout=120)
        check(client.weight_version() == "base", "the engine does not start at weight_version base")
        sum0 = engine_checksum(client)
        if sum0 is not None and not SGLANG:
            check(sum0 == base_sum, "the engine's weights differ from the trainer's (same seed)")
        with timed("one chat request") as notes:
            import httpx

            answer = httpx.post(
                f"{engine.url}/v1/chat/completions",
                json={
                    "model": "m",
                    "messages": [{"role": "user", "content": "hi"}],
                    "max_tokens": 4,
                    "temperature": 0,
                },
                timeout=60,
                trust_env=False,
            )
            check(answer.status_code == 200, f"chat answered {answer.status_code}")
            notes.append(f"served {answer.json().get('metadata', {}).get('weight_version')}")

        with timed("train one LoRA step") as notes:
            trainer = TorchTrainer(loaded, mode="lora", lr=1e-3, seed=0)
            samples = samples_for(loaded.tokenizer)
            metrics = trainer.step(samples)
            notes.append(f"loss {metrics.loss:.4f}, {metrics.tokens} tokens")
        weights = trainer.served_weights()
        with timed("ipc update (CUDA IPC)" if gpus else "ipc update (shared memory)") as notes:
            on_device = {k: v.to(device) for k, v in weights.items()}
            stats = IpcSync(client).push(on_device, "w1")
            notes.append(f"{stats.bytes / 1e6:.1f} MB, {stats.gb_per_s:.2f} GB/s")
        check(client.weight_version() == "w1", "weight_version did not advance to w1 (ipc)")
        sum1 = engine_checksum(client)
        if sum1 is not None:
            check(sum1 != sum0, "the checksum did not change after the ipc update")
            if not SGLANG:
                check(sum1 == models.state_checksum(weights), "ipc: the engine's weights differ")

        with timed("train a second step"):
            trainer.step(samples)
        weights = trainer.served_weights()
        on_device = {k: v.to(device) for k, v in weights.items()}
        with timed(f"dist update (gloo, {'CUDA' if gpus else 'CPU'} tensors)") as notes:
            sync = DistSync(client, backend="gloo", timeout=120)
            stats = sync.push(on_device, "w2")
            notes.append(
                f"{stats.bytes / 1e6:.1f} MB, {stats.buckets} buckets, "
                f"{stats.gb_per_s:.2f} GB/s incl. joining"
            )
        with timed("dist update again (group formed)") as notes:
            stats = sync.push(on_device, "w2")
            notes.append(f"{stats.gb_per_s:.2f} GB/s")
            sync.close()
        check(client.weight_version() == "w2", "weight_version did not advance to w2 (dist)")
        sum2 = engine_checksum(client)
        if sum2 is not None:
            check(sum2 not in (sum0, sum1), "the checksum did not change after the dist update")
            if not SGLANG:
                check(sum2 == models.state_checksum(weights), "dist: the engine's weights differ")

        if gpus >= 2:
            with timed("start a second engine on cuda:1"):
                second = launch("cuda:1", WORK / "engine2.log", gpu=1)
            client2 = EngineClient(second.url, timeout=120)
            with timed("dist update (nccl, cuda:0 -> cuda:1)") as notes:
                sync = DistSync(client2, backend="nccl", timeout=120)
                stats = sync.push(on_device, "w2")
                notes.append(f"{stats.gb_per_s:.2f} GB/s incl. joining")
                sync.close()
            check(client2.weight_version() == "w2", "weight_version did not advance (nccl)")
            sum3 = engine_checksum(client2)
            if sum3 is not None and not SGLANG:
                check(sum3 == models.state_checksum(weights), "nccl: the engine's weights differ")
        elif DEVICE == "cuda":
            say("nccl: skipped (one GPU; NCCL refuses two ranks of one group on one GPU)")
    except CheckFailed as exc:
        summary()
        stop(1, f"FAIL: {exc}")
    except ReefError as exc:
        summary()
        stop(1, f"FAIL: {exc.one_line()}")
    finally:
        for proc in (second, engine):
            if proc is not None:
                proc.stop()
    summary()
    say("OK: weights trained, pushed over ipc and dist, checksum changed, weight_version advanced")


def summary() -> None:
    print()
    print(f"{'step':<40} {'seconds':>8}  note")
    for what, seconds, note in ROWS:
        print(f"{what:<40} {seconds:>8.2f}  {note}")
    print(f"{'total':<40} {sum(s for _, s, _ in ROWS):>8.2f}")
    print(flush=True)


def on_term(signum: int, frame: Any) -> None:
    raise SystemExit(f"gpu_check: FAIL: out of time (signal {signum})")


signal.signal(signal.SIGTERM, on_term)
try:
    main()
except SystemExit:
    raise
except Exception as exc:  # a bug or an unexpected failure: one line, and the type
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    stop(1, f"FAIL: {type(exc).__name__}: {first}")
PY
rc=$?
set -e
if [[ $rc -eq 124 || $rc -eq 137 ]]; then
  echo "gpu_check: FAIL: did not finish within $TIMEOUT s (engine logs in $WORK)" >&2
elif [[ $rc -eq 0 ]]; then
  rm -rf "$WORK"
elif compgen -G "$WORK/engine*.log" >/dev/null; then
  echo "gpu_check: engine logs in $WORK" >&2
fi
exit $rc

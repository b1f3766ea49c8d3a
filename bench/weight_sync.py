"""How fast reefd moves weights into a serving engine, measured side by side in one run.

    .venv/bin/python bench/weight_sync.py [--small] [--device cpu|cuda] [--backend gloo|nccl]
        [--rounds 3] [--bucket-mb 256] [--clients 2] [--pause-window 3] [--no-pause] [--threads N]

Two processes: this one is the trainer; a subprocess serves reefd's torch engine
(reefd.engine.torch_server) with a random-init model of SmolLM2-135M's shape
(reefd.models.smollm2_sized_config, ~540 MB fp32; ``--small``: 2 layers and an 8k vocab,
~47 MB). The trainer holds random tensors of the engine's names and shapes and moves
them, in rounds that interleave the rows so background load hits them alike (medians):

  copy        copying them into preallocated tensors in this process (CPU; on a GPU a
              device-to-device copy): what memory bandwidth allows
  raw         torch.distributed.broadcast of the same buckets (one flat uint8 tensor
              each) between the same two processes, into buffers the receiver allocated
              once: the transport alone
  reef dist   reefd's DistSync push (the update request per bucket in a thread, the
              broadcast, the engine allocating, cutting and loading each bucket, the
              version, the cache flush): what a swap costs

and prints GB/s and the ratio reef dist / raw (target >= 0.8: the protocol adds <= 25%).

Then the swap's serving pause (unless --no-pause): ``--clients`` threads send chat
requests back to back; one push happens in the middle; every request is counted as
"during" (its span overlaps the push) or "outside". Requests must not fail (0 failures
expected): a swap queues them behind the update. p50/p99 latency of both are printed.
On a busy CPU host torch's intra-op threads stall on every copy (OpenMP wake-ups):
``--threads 1`` in both processes shows the copy and load cost without that. Figures go
in docs/performance.md; they are not test assertions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._provenance import provenance  # noqa: E402

CHAT = {
    "model": "m",
    "messages": [{"role": "user", "content": "Say something about weights."}],
    "max_tokens": 8,
    "temperature": 0,
}


def model_config(small: bool) -> Any:
    from reefd import models

    if small:
        return models.smollm2_sized_config(num_hidden_layers=2, vocab_size=8192)
    return models.smollm2_sized_config()


# --- the receiver process ---------------------------------------------------------------


def receiver(args: argparse.Namespace) -> None:
    """The engine process: reefd's torch engine plus one bench route for the raw row."""
    import torch
    import torch.distributed as dist
    import uvicorn
    from transformers import LlamaForCausalLM

    from reefd import models
    from reefd.engine.torch_server import create_engine_app

    torch.manual_seed(0)
    device = args.device if args.backend != "nccl" else "cuda:1"
    model: Any = LlamaForCausalLM(model_config(args.small))
    model = model.to(device).eval()
    loaded = models.Loaded(model, models.byte_tokenizer(), "bench", "smollm2-sized")
    app = create_engine_app(loaded, group_timeout=120)
    buffers: dict[tuple[int, ...], list[Any]] = {}

    @app.post("/bench/raw")
    def raw(body: dict[str, Any]) -> dict[str, Any]:
        if not dist.is_initialized():
            dist.init_process_group(
                body["backend"],
                init_method=f"tcp://{body['master_address']}:{body['master_port']}",
                rank=1,
                world_size=2,
            )
        sizes = tuple(int(n) for n in body["sizes"])
        if sizes not in buffers:  # allocated (and touched) once: the transport alone
            buffers[sizes] = [torch.zeros(n, dtype=torch.uint8, device=device) for n in sizes]
        for _ in range(int(body["rounds"])):
            for buf in buffers[sizes]:
                dist.broadcast(buf, src=0)
            dist.barrier()
        return {"success": True}

    print("ready", flush=True)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


# --- the trainer process -----------------------------------------------------------------


def tensor_set(small: bool, device: str) -> dict[str, Any]:
    """Random tensors with the engine's names and shapes (tied names share one tensor)."""
    import torch
    from transformers import LlamaForCausalLM

    from reefd import models

    with torch.device("meta"):
        shape_of = LlamaForCausalLM(model_config(small))
    gen = torch.Generator(device="cpu").manual_seed(1)
    made: dict[int, Any] = {}
    out: dict[str, Any] = {}
    for name, t in models.param_map(shape_of).items():
        if id(t) not in made:
            made[id(t)] = torch.randn(t.shape, generator=gen, dtype=torch.float32).to(device)
        out[name] = made[id(t)]
    return out


def unique_bytes(tensors: dict[str, Any]) -> int:
    seen = {id(t): t for t in tensors.values()}
    return sum(t.numel() * t.element_size() for t in seen.values())


def sync_device(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def copy_seconds(tensors: dict[str, Any], targets: dict[str, Any], device: str) -> float:
    sync_device(device)
    start = time.perf_counter()
    for name, t in tensors.items():
        targets[name].copy_(t)
    sync_device(device)
    return time.perf_counter() - start


def start_receiver(args: argparse.Namespace, port: int, log: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--receiver", "--port", str(port)]
    cmd += ["--device", args.device, "--backend", args.backend, "--threads", str(args.threads)]
    if args.small:
        cmd.append("--small")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)


def wait_healthy(client: Any, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-5:]
            sys.exit("the engine process died:\n" + "\n".join(tail))
        if client.health():
            return
        time.sleep(0.2)
    sys.exit("the engine did not come up within 600 s")


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def serving_pause(url: str, sync: Any, tensors: dict[str, Any], args: argparse.Namespace) -> None:
    import httpx

    spans: list[tuple[float, float, int]] = []
    errors: list[str] = []
    stop = threading.Event()
    lock = threading.Lock()

    def client_loop() -> None:
        with httpx.Client(base_url=url, timeout=120, trust_env=False) as http:
            while not stop.is_set():
                t0 = time.perf_counter()
                try:
                    status = http.post("/v1/chat/completions", json=CHAT).status_code
                except httpx.HTTPError as exc:
                    status = 0
                    with lock:
                        errors.append(f"{type(exc).__name__}: {exc}")
                with lock:
                    spans.append((t0, time.perf_counter(), status))

    # When the update is in and the cache flush begins (the flush retries while requests
    # run; requests are not held up by it).
    flush_started: list[float] = []
    flush_cache = sync.client.flush_cache

    def timed_flush() -> None:
        flush_started.append(time.perf_counter())
        flush_cache()

    sync.client.flush_cache = timed_flush
    threads = [threading.Thread(target=client_loop, daemon=True) for _ in range(args.clients)]
    for t in threads:
        t.start()
    time.sleep(args.pause_window)
    swap_start = time.perf_counter()
    stats = sync.push({k: v * 0.5 for k, v in tensors.items()}, "w-pause")
    swap_end = time.perf_counter()
    time.sleep(args.pause_window)
    stop.set()
    for t in threads:
        t.join(150)
    sync.client.flush_cache = flush_cache
    update_end = flush_started[0] if flush_started else swap_end

    def overlaps(a: float, b: float, start: float, end: float) -> bool:
        return a < end and b > start

    during = [(b - a) * 1000 for a, b, _ in spans if overlaps(a, b, swap_start, update_end)]
    flushing = [
        (b - a) * 1000
        for a, b, _ in spans
        if overlaps(a, b, update_end, swap_end) and not overlaps(a, b, swap_start, update_end)
    ]
    outside = [(b - a) * 1000 for a, b, _ in spans if not overlaps(a, b, swap_start, swap_end)]
    failed = [s for _, _, s in spans if s != 200]
    print()
    print(
        f"serving pause: {len(spans)} chat requests from {args.clients} clients; swap of "
        f"{stats.bytes / 1e6:.0f} MB: update {(update_end - swap_start) * 1000:.0f} ms, "
        f"then cache flush {(swap_end - update_end) * 1000:.0f} ms"
    )
    print(f"{'requests':<16} {'count':>6} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}")
    for label, values in (
        ("outside", outside),
        ("during update", during),
        ("during flush", flushing),
    ):
        print(
            f"{label:<16} {len(values):>6} {fmt(percentile(values, 0.5), '9.1f')} "
            f"{fmt(percentile(values, 0.99), '9.1f')} {fmt(max(values, default=None), '9.1f')}"
        )
    print(f"failed requests: {len(failed)}  (target 0)")
    for line in errors[:3]:
        print(f"  {line}")


def trainer(args: argparse.Namespace) -> None:
    import httpx
    import torch
    import torch.distributed as dist

    from reefd.engine.client import EngineClient
    from reefd.sync import buckets
    from reefd.sync.dist import DistSync, free_port

    device = args.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("--device cuda: CUDA is not available here")
    if args.backend == "nccl" and torch.cuda.device_count() < 2:
        sys.exit("--backend nccl needs two GPUs (NCCL refuses two ranks on one GPU)")
    if args.backend == "nccl":
        device = "cuda:0"
    print(provenance("weight_sync.py"), end="\n\n")
    nbytes = unique_bytes(tensor_set(args.small, device))
    # Packed as the trainer hands them over (TorchTrainer.served_weights: one buffer per
    # dtype in name order), so each bucket is broadcast from them with no staging copy.
    tensors = buckets.pack(tensor_set(args.small, device))
    bucket_bytes = int(args.bucket_mb * 1024 * 1024)
    plan = buckets.plan([buckets.spec_of(n, t) for n, t in tensors.items()], bucket_bytes)
    sent_bytes = sum(s.nbytes() for b in plan for s in b)
    flats = [buckets.flatten(tensors, b).view(torch.uint8) for b in plan]
    # Preallocated once (the warm-up round touches every page): a fresh buffer per copy
    # would measure page faults, not the copy.
    targets = {name: torch.empty_like(t) for name, t in tensors.items()}

    tmp = Path(tempfile.mkdtemp(prefix="reef-bench-sync-"))
    port = free_port("127.0.0.1")
    log = tmp / "engine.log"
    proc = start_receiver(args, port, log)
    client = EngineClient(f"http://127.0.0.1:{port}", timeout=300)
    results: dict[str, list[float]] = {"copy": [], "raw": [], "reef dist": []}
    try:
        wait_healthy(client, proc, log)
        sync = DistSync(client, backend=args.backend, bucket_bytes=bucket_bytes, timeout=300)
        sync.push(tensors, "w0")  # connects; the engine's first touch of its buffers

        raw_port = free_port("127.0.0.1")
        rounds = args.rounds
        raw_body = {
            "backend": args.backend,
            "master_address": "127.0.0.1",
            "master_port": raw_port,
            "sizes": [int(f.numel()) for f in flats],
            "rounds": 1,
        }
        for round_no in range(rounds + 1):  # round 0 warms up every row
            results_round: dict[str, float] = {}
            results_round["copy"] = copy_seconds(tensors, targets, device)

            poster = threading.Thread(
                target=httpx.post,
                args=(f"{client.base_url}/bench/raw",),
                kwargs={"json": raw_body, "timeout": 300, "trust_env": False},
                daemon=True,
            )
            poster.start()
            if not dist.is_initialized():
                dist.init_process_group(
                    args.backend, init_method=f"tcp://127.0.0.1:{raw_port}", rank=0, world_size=2
                )
            sync_device(device)
            start = time.perf_counter()
            for flat in flats:
                dist.broadcast(flat, src=0)
            dist.barrier()
            sync_device(device)
            results_round["raw"] = time.perf_counter() - start
            poster.join(300)

            stats = sync.push(tensors, f"w{round_no + 1}")
            results_round["reef dist"] = stats.seconds
            if round_no > 0:
                for key, value in results_round.items():
                    results[key].append(value)
            print(
                f"round {round_no}/{rounds}{' (warm-up)' if round_no == 0 else ''}: "
                + ", ".join(
                    f"{k} {sent_bytes / v / 1e9:.2f} GB/s" for k, v in results_round.items()
                ),
                flush=True,
            )

        print()
        print(
            f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs, "
            f"torch threads {torch.get_num_threads()}; "
            f"device {device}, backend {args.backend}, {len(tensors)} tensors, "
            f"{nbytes / 1e6:.0f} MB ({sent_bytes / 1e6:.0f} MB sent: tied names travel twice), "
            f"{len(plan)} buckets of <= {args.bucket_mb:g} MiB"
        )
        medians = {k: statistics.median(v) for k, v in results.items()}
        copy_label = "copy (device)" if device.startswith("cuda") else "copy (prealloc)"
        print(f"{'path':<16} {'median s':>9} {'GB/s':>8} {'vs copy':>8}")
        for key, label in (
            ("copy", copy_label),
            ("raw", "raw broadcast"),
            ("reef dist", "reef dist"),
        ):
            seconds = medians[key]
            print(
                f"{label:<16} {seconds:>9.3f} {sent_bytes / seconds / 1e9:>8.2f} "
                f"{medians['copy'] / seconds:>8.2f}"
            )
        ratio = medians["raw"] / medians["reef dist"]
        print(f"ratio reef dist / raw broadcast (GB/s): {ratio:.2f}  (target >= 0.8)")
        version = client.weight_version()
        print(f"engine weight_version after the rounds: {version}")

        if not args.no_pause:
            serving_pause(client.base_url, sync, tensors, args)
        sync.close()
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        if dist.is_initialized():
            dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="2 layers, 8k vocab (~47 MB)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--backend", default="gloo", choices=("gloo", "nccl"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bucket-mb", type=float, default=256)  # reefd.yaml's default
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--pause-window", type=float, default=3.0, help="seconds before/after")
    ap.add_argument("--no-pause", action="store_true", help="leave out the serving pause")
    ap.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch intra-op threads in both processes (default: torch's choice); on a "
        "busy machine 1 avoids OpenMP wake-up stalls on every copy",
    )
    ap.add_argument("--receiver", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.receiver:
        receiver(args)
    else:
        trainer(args)


if __name__ == "__main__":
    main()

# ruff: noqa: E501
"""Where reef serve's c=1 latency tail comes from: one instrumented run.

    .venv/bin/python bench/proxy_tail.py [--duration 5] [--variant ""|no-record|gc-freeze|no-gc-freeze|gc-off|switch-default|switch-50us]

Starts the scripted upstream of proxy_overhead.py and `reef serve` (recording, journal
on) with probes inside: every cyclic-GC pass (generation, pause), every recorder batch
(records, wall and CPU time of the writer thread), and the event loop's own lag (a 1 ms
ticker: how late it wakes). Drives it with wrk at concurrency 1 and prints the latency
percentiles next to what the probes saw, so a p99 can be matched to its cause: a GC pass
of N ms, a writer batch holding the GIL, or neither.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import proxy_overhead as po

PROBED_REEF = r"""
import asyncio, gc, json, signal, sys, threading, time
from reef_cli.server import proxy as proxy_module, recorder as recorder_module
from reef_cli.server.serve_config import ServeConfig
from reef_cli.server.run import serve

out_path, variant = sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else ""
stats = {"gc": [], "batches": [], "lag": []}
_gc_start = {}

def on_gc(phase, info):
    if phase == "start":
        _gc_start[threading.get_ident()] = time.perf_counter()
    else:
        t0 = _gc_start.pop(threading.get_ident(), None)
        if t0 is not None:
            stats["gc"].append((info["generation"], (time.perf_counter() - t0) * 1000,
                                threading.current_thread().name))
gc.callbacks.append(on_gc)
if variant == "no-gc-freeze":  # reef serve without its gc.freeze() after start-up
    gc.freeze = lambda: None
if variant == "gc-off":
    gc.disable()

write = recorder_module.Recorder._write
def timed_write(self, items, journaled=True):
    w0, c0 = time.perf_counter(), time.thread_time()
    write(self, items, journaled)
    stats["batches"].append((len(items), (time.perf_counter() - w0) * 1000, (time.thread_time() - c0) * 1000))
recorder_module.Recorder._write = timed_write

started = proxy_module.Proxy.start
async def start(self):
    await started(self)
    if variant == "gc-freeze":
        gc.collect(); gc.freeze()
    async def ticker():
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(0.001)
            stats["lag"].append((time.perf_counter() - t0) * 1000 - 1.0)
    self._ticker = asyncio.get_running_loop().create_task(ticker())
proxy_module.Proxy.start = start

def dump(*_args):
    with open(out_path + ".tmp", "w") as f:
        json.dump(stats, f)
    import os
    os.replace(out_path + ".tmp", out_path)
signal.signal(signal.SIGUSR1, dump)  # uvicorn takes SIGTERM/SIGINT, not this one
if variant == "switch-default":
    sys.setswitchinterval = lambda interval: None
if variant == "switch-50us":
    sys.setswitchinterval = lambda interval, set_=sys.setswitchinterval: set_(0.00005)
serve(ServeConfig(port=int(sys.argv[1]), upstream=sys.argv[2] + "/v1", upstream_dialect="openai",
                  record=variant != "no-record"),
      announce=lambda s: None)
"""


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--variant", default="")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="reef-tail-"))
    env = {
        **os.environ,
        "REEF_HOME": str(tmp / "home"),
        "REEF_TOKEN": po.TOKEN,
        "PYTHONPATH": str(po.ROOT),
    }
    lua = tmp / "post.lua"
    lua.write_text(
        f'wrk.method = "POST"\nwrk.body = {json.dumps(po.BODY)}\nwrk.headers["Content-Type"] = "application/json"\n'
    )
    (tmp / "upstream.py").write_text(po.UPSTREAM_APP)
    (tmp / "reef.py").write_text(PROBED_REEF)
    up, reef = po.free_port(), po.free_port()
    procs = []
    try:
        procs.append(subprocess.Popen([po.PY, str(tmp / "upstream.py"), str(up)], env=env))
        po.wait_port(up, procs[-1])
        stats_file = tmp / "stats.json"
        procs.append(
            subprocess.Popen(
                [
                    po.PY,
                    str(tmp / "reef.py"),
                    str(reef),
                    f"http://127.0.0.1:{up}",
                    str(stats_file),
                    args.variant,
                ],
                env=env,
                stderr=subprocess.DEVNULL,
            )
        )
        po.wait_port(reef, procs[-1])
        url = f"http://127.0.0.1:{reef}/v1/chat/completions"
        headers = {"Authorization": f"Bearer {po.TOKEN}"}
        po.wrk(url, 1, 1, headers, lua)  # warm up
        result = po.wrk(url, 1, args.duration, headers, lua)
        time.sleep(0.3)  # the last batch
        procs[-1].send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while not stats_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        stats = json.loads(stats_file.read_text())
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(20)
    gcs = stats["gc"]
    batches = stats["batches"]
    lag = stats["lag"]
    requests = result["rps"] * args.duration
    print(
        f"variant {args.variant or 'default'}: {requests:.0f} requests at c=1, "
        f"p50 {result['p50']:.3f} ms, p99 {result['p99']:.3f} ms; load {os.getloadavg()[0]:.2f}"
    )
    for gen in (0, 1, 2):
        pauses = [ms for g, ms, _t in gcs if g == gen]
        if pauses:
            print(
                f"  gc gen{gen}: {len(pauses)} passes ({len(pauses) / max(requests, 1) * 100:.2f} per 100 requests), "
                f"pause median {pct(pauses, 0.5):.3f} ms, p99 {pct(pauses, 0.99):.3f}, max {max(pauses):.3f}"
            )
    on_writer = sum(1 for _g, _ms, t in gcs if t == "reef-recorder")
    print(f"  gc passes on the writer thread: {on_writer} of {len(gcs)}")
    if batches:
        sizes = [n for n, _w, _c in batches]
        walls = [w for _n, w, _c in batches]
        cpus = [c for _n, _w, c in batches]
        total_cpu = sum(cpus)
        print(
            f"  writer batches: {len(batches)}, records median {pct(sizes, 0.5):.0f}, "
            f"wall median {pct(walls, 0.5):.3f} ms max {max(walls):.3f}, "
            f"CPU median {pct(cpus, 0.5):.3f} ms max {max(cpus):.3f}; "
            f"writer CPU {total_cpu / args.duration / 10:.2f}% of one core "
            f"({total_cpu / max(requests, 1) * 1000:.1f} us per request)"
        )
    if lag:
        print(
            f"  event-loop lag (1 ms ticker): median {pct(lag, 0.5):.3f} ms, p99 {pct(lag, 0.99):.3f}, max {max(lag):.3f}"
        )
    time.sleep(0.1)


if __name__ == "__main__":
    main()

# ruff: noqa: E501
"""What `reef serve` adds on top of a model server, measured side by side in one run.

    .venv/bin/python bench/proxy_overhead.py [--duration 5] [--litellm /tmp/litellm-venv/bin/litellm]

Starts a fast scripted upstream (uvicorn + bare Starlette: answers at once, 20 SSE chunks
when streaming), then measures, with wrk as the load generator:

  direct      the upstream itself
  bare relay  bench/bare_relay.py (~30 lines: Starlette + aiohttp, nothing else)
  reef serve  the real server, auth on, recording every exchange to SQLite
  nginx       proxy_pass (where nginx is installed)
  litellm     the LiteLLM proxy, no database (where installed; pass --litellm PATH)

Reports added latency p50/p99 at concurrency 1 (vs direct), requests/s at concurrency 16,
and streaming time-to-first-chunk, and prints reef's ratios against the bare relay.
Figures go in docs/performance.md; they are not test assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
TOKEN = "reef_bench_token"
BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hello there"}]})
STREAM_BODY = json.dumps(
    {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hello there"}]}
)

UPSTREAM_APP = r"""
import asyncio, json, sys, uvicorn
from starlette.applications import Starlette
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

ANSWER = json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi!"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}).encode()
CHUNKS = [("data: " + json.dumps({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
    "model": "m", "choices": [{"index": 0, "delta": {"content": f"w{i} "}, "finish_reason": None}]})
    + "\n\n").encode() for i in range(20)] + [b"data: [DONE]\n\n"]

async def chat(request):
    body = await request.body()
    if b'"slow"' in body:
        async def slow():
            for c in CHUNKS[:5]:
                yield c
                await asyncio.sleep(0.05)
            yield CHUNKS[-1]
        return StreamingResponse(slow(), media_type="text/event-stream")
    if b'"stream": true' in body or b'"stream":true' in body:
        async def gen():
            for c in CHUNKS:
                yield c
        return StreamingResponse(gen(), media_type="text/event-stream")
    return Response(ANSWER, media_type="application/json")

app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""

REEF_APP = r"""
import sys
from reef_cli.server.config import ServeConfig
from reef_cli.server.run import serve
serve(ServeConfig(port=int(sys.argv[1]), upstream=sys.argv[2] + "/v1", upstream_dialect="openai"),
      announce=lambda s: None)
"""

NGINX_CONF = """
worker_processes 1;
error_log {prefix}/error.log warn;
pid {prefix}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {prefix}/tmp;
  proxy_temp_path {prefix}/tmp;
  upstream up {{ server 127.0.0.1:{up}; keepalive 64; }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }}
  }}
}}
"""

LITELLM_CONF = """
model_list:
  - model_name: m
    litellm_params:
      model: openai/m
      api_base: http://127.0.0.1:{up}/v1
      api_key: none
general_settings:
  master_key: sk-bench
litellm_settings:
  set_verbose: false
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"port {port} did not open")


def parse_ms(text: str) -> float:
    value, unit = re.match(r"([\d.]+)(us|ms|s)", text).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def wrk(
    url: str, conns: int, duration: int, headers: dict[str, str], lua: Path
) -> dict[str, float]:
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{duration}s", "--latency", "-s", str(lua)]
    for k, v in headers.items():
        cmd += ["-H", f"{k}: {v}"]
    out = subprocess.run([*cmd, url], capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = parse_ms(re.search(r"50%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    p99 = parse_ms(re.search(r"99%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        raise RuntimeError(f"{url}: {non2xx.group(1)} non-2xx answers\n{out}")
    return {"rps": rps, "p50": p50, "p99": p99}


def first_chunk_ms(host: str, port: int, path: str, headers: dict[str, str], n: int) -> float:
    """Median time from sending a streaming request to the first body byte (keep-alive)."""
    import http.client

    conn = http.client.HTTPConnection(host, port, timeout=10)
    times = []
    for _ in range(n):
        start = time.perf_counter()
        conn.request(
            "POST", path, body=STREAM_BODY, headers={"content-type": "application/json", **headers}
        )
        resp = conn.getresponse()
        resp.read1(1) if hasattr(resp, "read1") else resp.read(1)
        times.append((time.perf_counter() - start) * 1000)
        resp.read()
    conn.close()
    return statistics.median(times[5:])


def check_streaming(port: int, path: str, headers: dict[str, str]) -> bool:
    """Upstream sends 5 chunks 50 ms apart: the first must arrive long before the last."""
    import http.client

    body = json.dumps({"model": "m", "stream": True, "slow": True, "messages": []})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    start = time.perf_counter()
    conn.request("POST", path, body=body, headers={"content-type": "application/json", **headers})
    resp = conn.getresponse()
    first = None
    while True:
        data = resp.read1(65536)
        if not data:
            break
        if first is None:
            first = time.perf_counter() - start
    total = time.perf_counter() - start
    conn.close()
    return first is not None and total > 0.2 and first < 0.1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--litellm", default=shutil.which("litellm") or "/tmp/litellm-venv/bin/litellm")
    ap.add_argument("--ttfc-requests", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed (apt-get install wrk)")
    tmp = Path(tempfile.mkdtemp(prefix="reef-bench-"))
    lua = tmp / "post.lua"
    lua.write_text(
        f'wrk.method = "POST"\nwrk.body = {json.dumps(BODY)}\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
    )
    procs: list[subprocess.Popen] = []
    env = {
        **os.environ,
        "REEF_HOME": str(tmp / "home"),
        "REEF_TOKEN": TOKEN,
        "PYTHONPATH": str(ROOT),
    }

    def start(cmd: list[str], port: int, **kw) -> subprocess.Popen:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, **kw
        )
        procs.append(proc)
        wait_port(port, proc)
        return proc

    results: dict[str, dict[str, float]] = {}
    try:
        up = free_port()
        (tmp / "upstream.py").write_text(UPSTREAM_APP)
        start([PY, str(tmp / "upstream.py"), str(up)], up)
        targets: list[tuple[str, int, dict[str, str]]] = [("direct", up, {})]

        relay = free_port()
        start(
            [PY, str(ROOT / "bench" / "bare_relay.py"), str(relay), f"http://127.0.0.1:{up}"], relay
        )
        targets.append(("bare relay", relay, {}))

        reef = free_port()
        (tmp / "reef.py").write_text(REEF_APP)
        start([PY, str(tmp / "reef.py"), str(reef), f"http://127.0.0.1:{up}"], reef)
        targets.append(("reef serve", reef, {"Authorization": f"Bearer {TOKEN}"}))

        if shutil.which("nginx"):
            port = free_port()
            (tmp / "nginx" / "tmp").mkdir(parents=True)
            conf = tmp / "nginx" / "nginx.conf"
            conf.write_text(NGINX_CONF.format(prefix=tmp / "nginx", up=up, port=port))
            start(["nginx", "-c", str(conf), "-p", str(tmp / "nginx"), "-g", "daemon off;"], port)
            targets.append(("nginx", port, {}))
        else:
            print("skip nginx: not installed (apt-get install nginx-light)")

        if args.litellm and Path(args.litellm).exists():
            port = free_port()
            conf = tmp / "litellm.yaml"
            conf.write_text(LITELLM_CONF.format(up=up))
            start(
                [args.litellm, "--config", str(conf), "--port", str(port), "--num_workers", "1"],
                port,
            )
            time.sleep(3)
            targets.append(("litellm", port, {"Authorization": "Bearer sk-bench"}))
        else:
            print(
                "skip litellm: not installed (python -m venv /tmp/litellm-venv && "
                "/tmp/litellm-venv/bin/pip install 'litellm[proxy]'; or pass --litellm PATH)"
            )

        path = "/v1/chat/completions"
        for _name, port, headers in targets:
            url = f"http://127.0.0.1:{port}{path}"
            for _ in range(30):  # warm up (reef creates its default scenario on first use)
                try:
                    wrk(url, 1, 1, headers, lua)
                    break
                except (AttributeError, RuntimeError):
                    time.sleep(0.5)
        # Rounds interleave the targets so background load hits them alike; medians reported.
        samples: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in targets}
        for round_no in range(args.rounds):
            for name, port, headers in targets:
                url = f"http://127.0.0.1:{port}{path}"
                try:
                    c1 = wrk(url, 1, args.duration, headers, lua)
                    c16 = wrk(url, 16, args.duration, headers, lua)
                except RuntimeError as exc:
                    print(f"{name}: sample dropped: {str(exc).splitlines()[0]}", flush=True)
                    continue
                ttfc = first_chunk_ms("127.0.0.1", port, path, headers, args.ttfc_requests)
                samples[name].append(
                    {"p50": c1["p50"], "p99": c1["p99"], "rps16": c16["rps"], "ttfc": ttfc}
                )
            print(f"round {round_no + 1}/{args.rounds} done", flush=True)
        for name, port, headers in targets:
            if not samples[name]:
                print(f"{name}: no valid samples", flush=True)
                continue
            results[name] = {
                key: statistics.median(s[key] for s in samples[name])
                for key in ("p50", "p99", "rps16", "ttfc")
            }
            results[name]["streamed"] = float(check_streaming(port, path, headers))
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
    records = 0
    db = tmp / "home" / "records.sqlite3"
    if db.exists():
        records = sqlite3.connect(db).execute("SELECT COUNT(*) FROM records").fetchone()[0]
    d = results["direct"]
    print()
    print(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(
        f"{'target':<12} {'p50 ms':>8} {'+p50 ms':>8} {'p99 ms':>8} {'+p99 ms':>8} {'c=16 req/s':>11} {'TTFC ms':>8} {'+TTFC':>7} streamed"
    )
    for name, r in results.items():
        print(
            f"{name:<12} {r['p50']:>8.3f} {r['p50'] - d['p50']:>8.3f} {r['p99']:>8.3f} {r['p99'] - d['p99']:>8.3f} "
            f"{r['rps16']:>11.0f} {r['ttfc']:>8.3f} {r['ttfc'] - d['ttfc']:>7.3f} {'yes' if r['streamed'] else 'NO'}"
        )
    b, reef = results["bare relay"], results["reef serve"]
    added_b = max(b["p50"] - d["p50"], 0.001)
    added_r = reef["p50"] - d["p50"]
    print()
    print(f"reef serve recorded {records} exchanges during the run")
    print(f"ratio added p50, reef / bare relay: {added_r / added_b:.2f}  (target <= 2)")
    print(
        f"ratio c=16 throughput, reef / bare relay: {reef['rps16'] / b['rps16']:.2f}  (target >= 0.5)"
    )
    for other in ("nginx", "litellm"):
        if other in results:
            o = results[other]
            print(
                f"ratio c=16 throughput, reef / {other}: {reef['rps16'] / o['rps16']:.2f}; "
                f"added p50 {other}: {o['p50'] - d['p50']:.3f} ms"
            )
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

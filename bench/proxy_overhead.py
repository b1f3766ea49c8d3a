# ruff: noqa: E501
"""What `reef serve` adds on top of a model server, measured side by side in one run.

    .venv/bin/python bench/proxy_overhead.py [--duration 5] [--litellm PATH | --no-litellm]
        [--variants journal-off,writer-thread,no-record,no-metrics,gc-freeze,gc-off,switch-default,switch-50us] [--no-portkey]
        [-c serve.yaml | --no-live-loop] [--no-responses] [--no-postgres | --stores]

Starts a fast scripted upstream (uvicorn + bare Starlette: answers at once, 20 SSE chunks
when streaming), then measures, with wrk as the load generator:

  direct      the upstream itself
  bare relay  bench/bare_relay.py (~30 lines: Starlette + aiohttp, nothing else)
  reef serve  the real server, auth on, recording every exchange to SQLite, with the
              receipt journal on (durability: every receipt survives a SIGKILL)
  reef: live-loop  reef serve with the live loop on (`-c FILE`, default a serve.yaml with
              reef: {recipe: skillclaw, batch_size: 1000000, poll_s: 1}): what the polling
              costs the hot path (--no-live-loop leaves the row out)
  reef: responses  the official-shape Responses request (POST /v1/responses: instructions,
              input items, a function tool) to the same reef serve, translated to the
              chat upstream and back (its +p50 is against direct chat, the call it makes)
  reef: responses relay  reef serve with upstream_responses: the Responses request relayed
              as bytes to the upstream's /v1/responses; against `bare relay: responses`
              (the bare relay with that route) and `direct: responses` (the upstream's)
              (--no-responses leaves the three Responses rows and reef: responses out)
  reef: postgresql  the same reef serve recording to PostgreSQL (REEF_DATABASE_URL) instead
              of SQLite: a throwaway cluster the bench starts (tests/fakes/postgres.py: initdb
              in a temp dir, a free port) with PostgreSQL's durable defaults (fsync and
              synchronous_commit on); its ratios are printed against the bare relay and
              against reef serve on SQLite (--no-postgres leaves it out; --stores runs only
              direct, bare relay, reef serve and this row)
  reef: X     reef serve with one thing changed (--variants), to find what the tail costs:
              journal-off (no receipt journal, so records are built on the serving process's
              writer thread), writer-thread (`record_writer: thread`: the journal on, records
              built on that thread instead of the writer process), no-record (--no-record), no-metrics
              (`metrics: false`: nothing counted for GET /metrics), gc-freeze
              (gc.freeze() after start-up; reef serve now does it itself), no-gc-freeze (without it),
              gc-off (no cyclic GC), switch-default
              (Python's 5 ms GIL switch interval instead of reef's 0.2 ms), switch-50us,
              executemany (rows inserted with executemany, one GIL round trip per row, on the
              writer thread)
  nginx       proxy_pass (where nginx is installed)
  litellm     the LiteLLM proxy, no database, one worker: --litellm PATH, else the bench
              installs litellm[proxy] (Reef's pinned version) into a venv in --cache-dir
  portkey     the Portkey AI gateway (npm @portkey-ai/gateway, run with Reef's pinned
              Node); the bench installs it into --cache-dir on first use
  A peer that cannot be installed or started is skipped with the reason.

Reports latency p50/p99 at concurrency 1 (and added vs direct), requests/s and p99 at
concurrency 16, and streaming time-to-first-chunk, and prints reef's ratios against the
bare relay (the Responses rows: against the bare relay on the same run). The last two
columns are the CPU time each target's process used per request during its c=16 run, and
that of the processes it started (reef serve's record writer): on two cores shared by wrk,
the upstream and the target, a row's throughput is bound by the CPU every process of the
run spends per request, and these say where it goes. A row whose wrk output cannot be
parsed says so; the bench goes on.
Figures go in docs/performance.md; they are not test assertions.
"""

from __future__ import annotations

import argparse
import contextlib
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
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
TOKEN = "reef_bench_token"
BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hello there"}]})
STREAM_BODY = json.dumps(
    {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hello there"}]}
)
# A Responses request as Codex and the openai SDK send it: instructions, input items, a
# function tool (the answer is text; the tool only has to be translated).
RESPONSES_REQUEST = {
    "model": "m",
    "instructions": "You are a coding agent.",
    "input": [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "hello there"}],
        }
    ],
    "tools": [
        {
            "type": "function",
            "name": "shell",
            "description": "run a command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        }
    ],
    "tool_choice": "auto",
    "parallel_tool_calls": False,
}
RESPONSES_BODY = json.dumps(RESPONSES_REQUEST)
RESPONSES_STREAM_BODY = json.dumps({**RESPONSES_REQUEST, "stream": True})
# what check_streaming sends ("slow" also in the text: a translated body keeps only that)
SLOW_BODY = json.dumps(
    {"model": "m", "stream": True, "slow": True, "messages": [{"role": "user", "content": "slow"}]}
)
SLOW_RESPONSES_BODY = json.dumps({"model": "m", "stream": True, "slow": True, "input": "slow"})
CHAT_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"

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

def event(kind, seq, **fields):
    data = json.dumps({"type": kind, "sequence_number": seq, **fields})
    return f"event: {kind}\ndata: {data}\n\n".encode()

def response(status, output):
    return {"id": "resp_1", "object": "response", "created_at": 0, "status": status, "model": "m",
        "output": output, "error": None, "incomplete_details": None, "instructions": None,
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "metadata": {},
        "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7} if output else None}

def message(text, status="completed"):
    content = [{"type": "output_text", "text": text, "annotations": []}] if text is not None else []
    return {"type": "message", "id": "msg_1", "status": status, "role": "assistant", "content": content}

def response_events(n):
    text = "".join(f"w{i} " for i in range(n))
    at = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    part = {"type": "output_text", "text": "", "annotations": []}
    head = [event("response.created", 0, response=response("in_progress", [])),
        event("response.in_progress", 1, response=response("in_progress", [])),
        event("response.output_item.added", 2, output_index=0, item=message(None, "in_progress")),
        event("response.content_part.added", 3, **at, part=part)]
    deltas = [event("response.output_text.delta", 4 + i, **at, delta=f"w{i} ") for i in range(n)]
    seq = 4 + n
    tail = [event("response.output_text.done", seq, **at, text=text),
        event("response.content_part.done", seq + 1, **at, part={**part, "text": text}),
        event("response.output_item.done", seq + 2, output_index=0, item=message(text)),
        event("response.completed", seq + 3, response=response("completed", [message(text)]))]
    return head, deltas, tail

R_ANSWER = json.dumps(response("completed", [message("Hi!")])).encode()
R_EVENTS = response_events(20)
R_SLOW = response_events(5)

async def responses(request):
    body = await request.body()
    if b'"slow"' in body:
        head, deltas, tail = R_SLOW
        async def slow():
            for c in head:
                yield c
            for c in deltas:
                yield c
                await asyncio.sleep(0.05)
            yield b"".join(tail)
        return StreamingResponse(slow(), media_type="text/event-stream")
    if b'"stream": true' in body or b'"stream":true' in body:
        async def gen():
            for part in R_EVENTS:
                for c in part:
                    yield c
        return StreamingResponse(gen(), media_type="text/event-stream")
    return Response(R_ANSWER, media_type="application/json")

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

app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]),
    Route("/v1/responses", responses, methods=["POST"])])
if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""

REEF_APP = r"""
import functools, gc, sys
from reef_cli.server import app as app_module, proxy as proxy_module
from reef_cli.server.serve_config import ServeConfig
from reef_cli.server.recorder import Recorder
from reef_cli.server.run import serve

variant = sys.argv[3] if len(sys.argv) > 3 else ""
if variant == "journal-off":
    app_module.Recorder = functools.partial(Recorder, durable=False)
if variant == "switch-default":
    sys.setswitchinterval = lambda interval: None  # keep Python's 5 ms
if variant == "switch-50us":
    sys.setswitchinterval = lambda interval, set_=sys.setswitchinterval: set_(0.00005)
if variant == "gc-off":
    gc.disable()
if variant == "no-gc-freeze":  # reef serve without its gc.freeze() after start-up
    gc.freeze = lambda: None
if variant == "executemany":  # the insert before the multi-row statement
    from reef_cli.core.records import record_values
    from reef_cli.core.store import sql as store_sql
    from reef_cli.core.store.sqlite import SQLiteStore

    def insert_many(self, recs):
        if not recs:
            return
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(store_sql.upsert_sql(1), [record_values(r) for r in recs])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    SQLiteStore.insert_many = insert_many
if variant == "gc-freeze":
    started = proxy_module.Proxy.start

    async def start_then_freeze(self):
        await started(self)
        gc.collect()
        gc.freeze()  # start-up objects leave the collector's generations

    proxy_module.Proxy.start = start_then_freeze
loop, runner = None, None
if variant == "live-loop":  # the serve.yaml's `reef:` section, with the real job runner
    from pathlib import Path
    from recipes.engine.worker import Worker
    from reef_cli.server.serve_config import build, load_file

    loop = build({"upstream": "http://x/v1", **load_file(Path(sys.argv[4]))}).reef
    runner = Worker()
responses = {"upstream_responses": True} if variant == "responses-relay" else {}
# the records built on a thread of the serving process (executemany patches that thread's store)
writer = "thread" if variant in ("writer-thread", "executemany") else "process"
serve(ServeConfig(port=int(sys.argv[1]), upstream=sys.argv[2] + "/v1", upstream_dialect="openai",
                  record=variant != "no-record", metrics=variant != "no-metrics", reef=loop,
                  record_writer=writer, **responses),
      announce=lambda s: None, jobs=runner)
"""
# The bare relay (bench/bare_relay.py as it is) with a /v1/responses route added: the
# reference for `reef: responses relay`.
RELAY_APP = r"""
import runpy, sys
import uvicorn
from starlette.routing import Route

relay = runpy.run_path(sys.argv[3], run_name="bare_relay")
relay["app"].router.routes.append(Route("/v1/responses", relay["relay"], methods=["POST"]))
uvicorn.run(relay["app"], host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
            access_log=False)
"""
# The live-loop row: `reef serve -c` with this file (the loop polls every second; the
# batch is never full, so what it costs is the polling, not a recipe's run).
LIVE_LOOP_YAML = "reef:\n  recipe: skillclaw\n  batch_size: 1000000\n  poll_s: 1\n"
VARIANTS = (
    "live-loop",
    "journal-off",
    "writer-thread",
    "no-record",
    "no-metrics",
    "gc-freeze",
    "no-gc-freeze",
    "gc-off",
    "switch-default",
    "switch-50us",
    "executemany",
)
# The PostgreSQL row: durable settings as a team's server runs them (the tests' cluster turns
# fsync and synchronous commit off; a bench of the store should not).
POSTGRES_ROW = "reef: postgresql"
POSTGRES_SETTINGS = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
PORTKEY_PACKAGE = "@portkey-ai/gateway@1.15.2"
LITELLM_VERSION = "1.110.2"  # when the bench runs outside Reef's venv

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


class Target(NamedTuple):
    """One row: where wrk sends which request, and the direct row its +p50 is taken from."""

    name: str
    port: int
    headers: dict[str, str]
    path: str = CHAT_PATH
    base: str = "direct"

    @property
    def responses(self) -> bool:
        return self.path == RESPONSES_PATH


class Unparsable(RuntimeError):
    """wrk ran but its output lacks a figure (no request finished, a crash, a new format)."""


UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}


def parse_ms(text: str | None) -> float | None:
    """wrk's latency text (``812.00us``, ``1.20ms``, ``2.01s``, ``1.50m``) in ms, else None."""
    if not text:
        return None
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text.strip())
    if match is None:
        return None
    try:
        return float(match.group(1)) * UNITS[match.group(2)]
    except ValueError:
        return None


def _figure(pattern: str, out: str) -> str | None:
    match = re.search(pattern, out)
    return match.group(1) if match else None


def parse_wrk(out: str) -> dict[str, float]:
    """Requests/s, p50 and p99 from ``wrk --latency`` output; ``Unparsable`` if any is missing."""
    rps_text = _figure(r"Requests/sec:\s+([\d.]+)", out)
    # Only the "Latency Distribution" lines: the Thread Stats line ends in "+/- Stdev"
    # percentages such as "93.50%" that a loose "50%" pattern picks up (the old crash).
    dist = out.split("Latency Distribution", 1)[1] if "Latency Distribution" in out else ""
    p50 = parse_ms(_figure(r"(?m)^\s*50%\s+(\S+)\s*$", dist))
    p99 = parse_ms(_figure(r"(?m)^\s*99%\s+(\S+)\s*$", dist))
    if rps_text is None or p50 is None or p99 is None:
        first = next((line.strip() for line in out.splitlines() if line.strip()), "no output")
        raise Unparsable(
            f"cannot parse wrk output (requests/s {rps_text!r}, p50 {p50!r}, p99 {p99!r}); "
            f"it begins: {first[:120]!r}"
        )
    return {"rps": float(rps_text), "p50": p50, "p99": p99}


def wrk(
    url: str, conns: int, duration: int, headers: dict[str, str], lua: Path
) -> dict[str, float]:
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{duration}s", "--latency", "-s", str(lua)]
    for k, v in headers.items():
        cmd += ["-H", f"{k}: {v}"]
    try:
        run = subprocess.run([*cmd, url], capture_output=True, text=True, timeout=duration + 60)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{url}: wrk did not finish") from exc
    out = run.stdout + run.stderr
    if run.returncode != 0:
        raise RuntimeError(f"{url}: wrk exited {run.returncode}: {out.strip()[:200]}")
    result = parse_wrk(out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        raise RuntimeError(f"{url}: {non2xx.group(1)} non-2xx answers\n{out}")
    return result


def first_chunk_ms(
    host: str, port: int, path: str, headers: dict[str, str], n: int, body: str = STREAM_BODY
) -> float:
    """Median time from sending a streaming request to the first body byte (keep-alive)."""
    import http.client

    conn = http.client.HTTPConnection(host, port, timeout=10)
    times = []
    for _ in range(n):
        start = time.perf_counter()
        conn.request(
            "POST", path, body=body, headers={"content-type": "application/json", **headers}
        )
        resp = conn.getresponse()
        resp.read1(1) if hasattr(resp, "read1") else resp.read(1)
        times.append((time.perf_counter() - start) * 1000)
        rest = resp.read()
        if resp.status != 200 or "event-stream" not in (resp.getheader("content-type") or ""):
            conn.close()
            raise ValueError(f"a stream was answered {resp.status}: {rest[:100]!r}")
    conn.close()
    return statistics.median(times[5:])


def check_streaming(port: int, path: str, headers: dict[str, str], body: str = SLOW_BODY) -> bool:
    """Upstream sends 5 chunks 50 ms apart: the first must arrive long before the last.
    ("slow" in the message too: gateways that drop unknown fields (Portkey) pass it on.)"""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    start = time.perf_counter()
    conn.request("POST", path, body=body, headers={"content-type": "application/json", **headers})
    resp = conn.getresponse()
    if resp.status != 200:
        raise ValueError(f"a stream was answered {resp.status}: {resp.read()[:100]!r}")
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


class Skip(Exception):
    """A peer that cannot run here; the message says why."""


def portkey_entry(cache: Path) -> tuple[str, str]:
    """(node, start-server.js) of the Portkey gateway, installed into ``cache`` by npm on
    first use with Reef's pinned Node (reef_cli/core/tools.py) first on PATH."""
    sys.path.insert(0, str(ROOT))
    from reef_cli.core import tools

    node = tools.find("node")
    if node is None:
        raise Skip("node is not installed (scripts/install_agents.sh pins Node 22 in .tools/)")
    entry = cache / "node_modules" / "@portkey-ai" / "gateway" / "build" / "start-server.js"
    if not entry.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise Skip("npm is not installed (apt-get install npm)")
        cache.mkdir(parents=True, exist_ok=True)
        path = f"{Path(node).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        print(f"installing {PORTKEY_PACKAGE} into {cache} ...", flush=True)
        try:
            run = subprocess.run(
                [
                    npm,
                    "install",
                    "--prefix",
                    str(cache),
                    "--no-audit",
                    "--no-fund",
                    "--ignore-scripts",
                    "--omit=dev",
                    "--no-save",
                    PORTKEY_PACKAGE,
                ],
                capture_output=True,
                text=True,
                timeout=600,
                env={**os.environ, "PATH": path},
            )
        except subprocess.TimeoutExpired:
            raise Skip("npm install took over 10 minutes") from None
        if run.returncode != 0 or not entry.exists():
            tail = (run.stderr or run.stdout).strip().splitlines()[-1:] or ["no output"]
            raise Skip(f"npm install {PORTKEY_PACKAGE} failed: {tail[0][:200]}")
    return node, str(entry)


def litellm_binary(cache: Path) -> str:
    """The LiteLLM proxy of Reef's pinned litellm version, in a venv under ``cache``
    (created with pip on first use; Reef's own venv lacks the proxy extras)."""
    from importlib import metadata

    try:
        version = metadata.version("litellm")
    except metadata.PackageNotFoundError:
        version = LITELLM_VERSION
    venv = cache / f"litellm-{version}"
    binary = venv / "bin" / "litellm"
    if binary.exists():
        return str(binary)
    print(f"installing litellm[proxy]=={version} into {venv} ...", flush=True)
    try:
        subprocess.run([PY, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
        run = subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", f"litellm[proxy]=={version}"],
            capture_output=True,
            text=True,
            timeout=1200,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        raise Skip(f"cannot create a venv for litellm: {exc}") from None
    if run.returncode != 0 or not binary.exists():
        tail = (run.stderr or run.stdout).strip().splitlines()[-1:] or ["no output"]
        shutil.rmtree(venv, ignore_errors=True)
        raise Skip(f"pip install litellm[proxy]=={version} failed: {tail[0][:200]}")
    return str(binary)


def cpu_seconds(pid: int) -> float:
    """The CPU time (user + system) process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def helpers_of(pid: int) -> list[int]:
    """The processes ``pid`` started that still run (reef serve's record writer)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def cpu_of(pid: int | None) -> tuple[float, dict[int, float]] | None:
    """CPU seconds used so far by ``pid`` and by each of its helpers; None without /proc."""
    if pid is None:
        return None
    try:
        helpers = {}
        for child in helpers_of(pid):
            with contextlib.suppress(OSError):
                helpers[child] = cpu_seconds(child)
        return cpu_seconds(pid), helpers
    except OSError:
        return None


def per_request(
    before: tuple[float, dict[int, float]] | None,
    after: tuple[float, dict[int, float]] | None,
    requests: float,
) -> tuple[float | None, float | None]:
    """Microseconds of CPU per request between two ``cpu_of`` readings: the target's own
    process, and its helpers (those alive at both readings). Under load on two shared
    cores these move less than throughput does: they do not count waiting for a core."""
    if before is None or after is None or requests <= 0:
        return None, None
    helpers = sum(t - before[1][pid] for pid, t in after[1].items() if pid in before[1])
    return 1e6 * (after[0] - before[0]) / requests, 1e6 * helpers / requests


def cpu_lines(results: dict[str, dict[str, float | None]]) -> list[str]:
    """CPU per request at c=16 of the reef rows against the bare relay's process."""
    relay = (results.get("bare relay") or {}).get("cpu16")
    if not relay:
        return []
    out = []
    for name, r in results.items():
        own, helpers = r.get("cpu16"), r.get("helpers16")
        if not name.startswith("reef") or own is None or r.get("p50") is None:
            continue
        line = f"CPU per request at c=16, {name} / bare relay: {own / relay:.2f} (serving process)"
        if helpers:
            line += f", {(own + helpers) / relay:.2f} with its record writer"
        out.append(line)
    return out


def median_of(samples: list[dict[str, float | None]], key: str) -> float | None:
    values = [s[key] for s in samples if s.get(key) is not None]
    return statistics.median(values) if values else None  # type: ignore[type-var]


def fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


# (row, its bare relay, their direct row, how the ratio line names the row)
RESPONSES_PAIRS = (
    ("reef: responses", "bare relay", "direct", "reef responses (translated to chat)"),
    ("reef: responses relay", "bare relay: responses", "direct: responses", "reef responses relay"),
)


def responses_ratios(results: dict[str, dict[str, float | None]]) -> list[str]:
    """The Responses rows against the bare relay of the same run, as the chat row's ratios:
    Reef translating a Responses request to the chat upstream vs the bare relay's chat
    relay; Reef relaying it to a Responses upstream vs the bare relay on /v1/responses."""
    lines: list[str] = []
    for row, relay, direct, label in RESPONSES_PAIRS:
        r = results.get(row)
        if r is None or r.get("p50") is None:
            continue  # left out (--no-responses), or its own "no result" line says why
        b, d = results.get(relay) or {}, results.get(direct) or {}
        missing = [n for n, x in ((relay, b), (direct, d)) if x.get("p50") is None]
        if missing:
            lines.append(f"no ratio for {row}: {' and '.join(missing)} has no result")
            continue
        added_b = max(b["p50"] - d["p50"], 0.001)  # type: ignore[operator]
        added_r = r["p50"] - d["p50"]  # type: ignore[operator]
        lines.append(
            f"ratio added p50, {label} / {relay}: {added_r / added_b:.2f}  (target <= 2); "
            f"added {added_r:.3f} vs {added_b:.3f} ms"
        )
        if r.get("rps16") and b.get("rps16"):
            lines.append(
                f"ratio c=16 throughput, {label} / {relay}: "
                f"{r['rps16'] / b['rps16']:.2f}  (target >= 0.5)"  # type: ignore[operator]
            )
    return lines


def start_postgres() -> Any:
    """A throwaway PostgreSQL cluster (tests/fakes/postgres.py) for the `reef: postgresql`
    row; ``Skip`` with the reason when PostgreSQL or psycopg is not installed."""
    sys.path.insert(0, str(ROOT))
    try:
        import psycopg  # noqa: F401 - the server needs it; say so here, not in its log

        from tests.fakes.postgres import PostgresCluster, PostgresMissing
    except ImportError as exc:
        raise Skip(f"{exc} (pip install -e '.[postgres]')") from None
    try:
        return PostgresCluster.start(settings=POSTGRES_SETTINGS)
    except PostgresMissing as exc:
        raise Skip(f"{exc} (apt-get install postgresql)") from None


def postgres_records(url: str) -> int | None:
    """How many records the PostgreSQL row wrote (None when the table cannot be read)."""
    import psycopg

    try:
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT COUNT(*) FROM records").fetchone()
    except psycopg.Error:
        return None
    return int(row[0]) if row else None


def store_ratios(results: dict[str, dict[str, float | None]]) -> list[str]:
    """reef serve on PostgreSQL against the bare relay (the targets every reef row is held to)
    and against reef serve on SQLite, from the same run."""
    pg = results.get(POSTGRES_ROW)
    if pg is None or pg.get("p50") is None:
        return []  # left out (--no-postgres, not installed), or its own line says why
    rows = {name: results.get(name) or {} for name in ("direct", "bare relay", "reef serve")}
    missing = [name for name, r in rows.items() if r.get("p50") is None]
    if missing:
        return [f"no ratio for {POSTGRES_ROW}: {' and '.join(missing)} has no result"]
    d, b, sq = rows["direct"], rows["bare relay"], rows["reef serve"]
    added_b = max(b["p50"] - d["p50"], 0.001)  # type: ignore[operator]
    added_s = max(sq["p50"] - d["p50"], 0.001)  # type: ignore[operator]
    added_p = pg["p50"] - d["p50"]  # type: ignore[operator]
    lines = [
        f"ratio added p50, reef postgresql / bare relay: {added_p / added_b:.2f}  (target <= 2); "
        f"/ reef serve (sqlite): {added_p / added_s:.2f}; added {added_p:.3f} vs "
        f"{added_s:.3f} ms (sqlite)"
    ]
    if pg.get("rps16") and b.get("rps16") and sq.get("rps16"):
        lines.append(
            f"ratio c=16 throughput, reef postgresql / bare relay: "
            f"{pg['rps16'] / b['rps16']:.2f}  (target >= 0.5); / reef serve (sqlite): "  # type: ignore[operator]
            f"{pg['rps16'] / sq['rps16']:.2f}"  # type: ignore[operator]
        )
    if pg.get("p99") is not None and sq.get("p99") is not None:
        lines.append(
            f"p99 c=1, reef postgresql / reef serve (sqlite): {pg['p99']:.3f} / "
            f"{sq['p99']:.3f} ms; c=16: {fmt(pg.get('p99_16'), '.3f')} / "
            f"{fmt(sq.get('p99_16'), '.3f')} ms"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--litellm", default=None, help="a litellm binary (default: install one)")
    ap.add_argument("--no-litellm", action="store_true")
    ap.add_argument("--ttfc-requests", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variants", default="", help=f"comma-separated, of: {', '.join(VARIANTS)}")
    ap.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "reef-bench",
        help="where the bench installs its peers (Portkey, LiteLLM)",
    )
    ap.add_argument("--no-portkey", action="store_true")
    ap.add_argument(
        "-c",
        "--config",
        type=Path,
        default=None,
        help="the serve.yaml of the `reef: live-loop` row (default: skillclaw, batch_size "
        "1000000, poll_s 1)",
    )
    ap.add_argument(
        "--no-live-loop", action="store_true", help="leave out the `reef: live-loop` row"
    )
    ap.add_argument(
        "--no-responses",
        action="store_true",
        help="leave out the Responses rows (reef: responses, reef: responses relay, and the "
        "bare relay and direct rows on /v1/responses)",
    )
    ap.add_argument(
        "--no-postgres",
        action="store_true",
        help="leave out the `reef: postgresql` row (reef serve recording to PostgreSQL)",
    )
    ap.add_argument(
        "--stores",
        action="store_true",
        help="only direct, bare relay, reef serve (SQLite) and reef: postgresql: no live "
        "loop, variants, Responses rows, nginx or peers",
    )
    args = ap.parse_args()
    if args.stores:
        if args.no_postgres or args.variants:
            sys.exit("--stores runs the store rows only: drop --no-postgres and --variants")
        args.no_live_loop = args.no_responses = args.no_litellm = args.no_portkey = True
    variants = [v for v in args.variants.split(",") if v]
    if not args.no_live_loop and "live-loop" not in variants:
        variants.insert(0, "live-loop")
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        sys.exit(f"unknown variant(s) {', '.join(unknown)}: use {', '.join(VARIANTS)}")
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed (apt-get install wrk)")
    tmp = Path(tempfile.mkdtemp(prefix="reef-bench-"))
    luas = {CHAT_PATH: tmp / "post.lua", RESPONSES_PATH: tmp / "responses.lua"}
    for lua_path, lua_body in ((CHAT_PATH, BODY), (RESPONSES_PATH, RESPONSES_BODY)):
        luas[lua_path].write_text(
            f'wrk.method = "POST"\nwrk.body = {json.dumps(lua_body)}\n'
            'wrk.headers["Content-Type"] = "application/json"\n'
        )
    procs: list[subprocess.Popen] = []
    env = {
        **{k: v for k, v in os.environ.items() if k != "REEF_DATABASE_URL"},  # SQLite rows
        "REEF_HOME": str(tmp / "home"),
        "REEF_TOKEN": TOKEN,
        "PYTHONPATH": str(ROOT),
    }

    pids: dict[int, int] = {}  # port -> the process serving it (for its CPU time)

    def start(cmd: list[str], port: int, **extra_env: str) -> subprocess.Popen:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**env, **extra_env}
        )
        procs.append(proc)
        pids[port] = proc.pid
        wait_port(port, proc)
        return proc

    homes: dict[str, Path] = {}
    cluster: Any = None
    pg_url = ""
    bases: dict[str, str] = {}  # row -> the direct row its added latency is taken from
    results: dict[str, dict[str, float | None]] = {}
    why_not: dict[str, str] = {}
    try:
        up = free_port()
        (tmp / "upstream.py").write_text(UPSTREAM_APP)
        start([PY, str(tmp / "upstream.py"), str(up)], up)
        targets: list[Target] = [Target("direct", up, {})]

        relay = free_port()
        start(
            [PY, str(ROOT / "bench" / "bare_relay.py"), str(relay), f"http://127.0.0.1:{up}"], relay
        )
        targets.append(Target("bare relay", relay, {}))
        reef_auth = {"Authorization": f"Bearer {TOKEN}"}
        responses_rows: list[Target] = []
        if not args.no_responses:
            relay_r = free_port()
            (tmp / "relay_responses.py").write_text(RELAY_APP)
            start(
                [
                    PY,
                    str(tmp / "relay_responses.py"),
                    str(relay_r),
                    f"http://127.0.0.1:{up}",
                    str(ROOT / "bench" / "bare_relay.py"),
                ],
                relay_r,
            )
            base = "direct: responses"
            targets.append(Target(base, up, {}, RESPONSES_PATH, base))
            targets.append(Target("bare relay: responses", relay_r, {}, RESPONSES_PATH, base))

        (tmp / "reef.py").write_text(REEF_APP)
        serve_yaml = args.config or tmp / "serve.yaml"
        if args.config is None:
            serve_yaml.write_text(LIVE_LOOP_YAML)
        reef_rows = ["", *variants] + ([] if args.no_responses else ["responses-relay"])
        for variant in reef_rows:
            name = f"reef: {variant}" if variant else "reef serve"
            if variant == "responses-relay":
                name = "reef: responses relay"
            port = free_port()
            homes[name] = tmp / (f"home-{variant}" if variant else "home")
            start(
                [
                    PY,
                    str(tmp / "reef.py"),
                    str(port),
                    f"http://127.0.0.1:{up}",
                    variant,
                    str(serve_yaml),
                ],
                port,
                REEF_HOME=str(homes[name]),
            )
            if variant == "responses-relay":
                responses_rows.append(
                    Target(name, port, reef_auth, RESPONSES_PATH, "direct: responses")
                )
                continue
            targets.append(Target(name, port, reef_auth))
            if not variant and not args.no_responses:  # the same server, translating
                responses_rows.insert(0, Target("reef: responses", port, reef_auth, RESPONSES_PATH))
        targets += responses_rows

        if args.no_postgres:
            print(f"skip {POSTGRES_ROW}: --no-postgres")
        else:
            try:
                cluster = start_postgres()
                pg_url = cluster.create_database("bench")
                port = free_port()
                start(
                    [PY, str(tmp / "reef.py"), str(port), f"http://127.0.0.1:{up}", ""],
                    port,
                    REEF_HOME=str(tmp / "home-postgresql"),
                    REEF_DATABASE_URL=pg_url,
                )
                at = next(i for i, t in enumerate(targets) if t.name == "reef serve") + 1
                targets.insert(at, Target(POSTGRES_ROW, port, reef_auth))  # beside SQLite's
            except (Skip, RuntimeError, OSError) as exc:
                print(f"skip {POSTGRES_ROW}: {exc}")

        if args.stores:
            print("skip nginx: --stores")
        elif shutil.which("nginx"):
            port = free_port()
            (tmp / "nginx" / "tmp").mkdir(parents=True)
            conf = tmp / "nginx" / "nginx.conf"
            conf.write_text(NGINX_CONF.format(prefix=tmp / "nginx", up=up, port=port))
            start(["nginx", "-c", str(conf), "-p", str(tmp / "nginx"), "-g", "daemon off;"], port)
            targets.append(Target("nginx", port, {}))
        else:
            print("skip nginx: not installed (apt-get install nginx-light)")

        if args.no_litellm:
            print("skip litellm: --no-litellm")
        else:
            try:
                binary = args.litellm or litellm_binary(args.cache_dir)
                port = free_port()
                conf = tmp / "litellm.yaml"
                conf.write_text(LITELLM_CONF.format(up=up))
                start(
                    [binary, "--config", str(conf), "--port", str(port), "--num_workers", "1"],
                    port,
                )
                time.sleep(3)
                targets.append(Target("litellm", port, {"Authorization": "Bearer sk-bench"}))
            except (Skip, RuntimeError, OSError) as exc:
                print(f"skip litellm: {exc}")

        if args.no_portkey:
            print("skip portkey: --no-portkey")
        else:
            try:
                node, entry = portkey_entry(
                    args.cache_dir / ("portkey-gateway-" + PORTKEY_PACKAGE.rsplit("@", 1)[1])
                )
                port = free_port()
                start([node, entry, f"--port={port}", "--headless"], port, NODE_ENV="production")
                targets.append(
                    Target(
                        "portkey",
                        port,
                        {
                            "Authorization": "Bearer sk-bench",
                            "x-portkey-provider": "openai",
                            "x-portkey-custom-host": f"http://127.0.0.1:{up}/v1",
                        },
                    )
                )
            except (Skip, RuntimeError, OSError) as exc:
                print(f"skip portkey: {exc}")

        ready: list[Target] = []
        for target in targets:
            name, port, headers = target.name, target.port, target.headers
            url = f"http://127.0.0.1:{port}{target.path}"
            last = ""
            for _ in range(30):  # warm up (reef creates its default scenario on first use)
                try:
                    wrk(url, 1, 1, headers, luas[target.path])
                    ready.append(target)
                    break
                except RuntimeError as exc:
                    last = str(exc).splitlines()[0]
                    time.sleep(0.5)
            else:
                why_not[name] = f"never answered 2xx while warming up: {last}"
                print(f"skip {name}: {why_not[name]}", flush=True)
        targets = ready
        bases.update({t.name: t.base for t in targets})
        # Rounds interleave the targets so background load hits them alike; medians reported.
        samples: dict[str, list[dict[str, float | None]]] = {t.name: [] for t in targets}
        for round_no in range(args.rounds):
            for target in targets:
                name, port, headers, path = target.name, target.port, target.headers, target.path
                url = f"http://127.0.0.1:{port}{path}"
                try:
                    c1 = wrk(url, 1, args.duration, headers, luas[path])
                    before = cpu_of(pids.get(port))
                    c16 = wrk(url, 16, args.duration, headers, luas[path])
                    cpu = per_request(before, cpu_of(pids.get(port)), c16["rps"] * args.duration)
                except RuntimeError as exc:
                    why_not[name] = str(exc).splitlines()[0]
                    print(f"{name}: sample dropped: {why_not[name]}", flush=True)
                    continue
                try:
                    ttfc: float | None = first_chunk_ms(
                        "127.0.0.1",
                        port,
                        path,
                        headers,
                        args.ttfc_requests,
                        RESPONSES_STREAM_BODY if target.responses else STREAM_BODY,
                    )
                except (OSError, ValueError) as exc:
                    print(f"{name}: no time-to-first-chunk: {exc}", flush=True)
                    ttfc = None
                samples[name].append(
                    {
                        "p50": c1["p50"],
                        "p99": c1["p99"],
                        "rps16": c16["rps"],
                        "p99_16": c16["p99"],
                        "ttfc": ttfc,
                        "cpu16": cpu[0],
                        "helpers16": cpu[1],
                    }
                )
            print(f"round {round_no + 1}/{args.rounds} done", flush=True)
        for target in targets:
            name = target.name
            if not samples[name]:
                why_not.setdefault(name, "no valid samples")
                continue
            results[name] = {
                key: median_of(samples[name], key)
                for key in ("p50", "p99", "rps16", "p99_16", "ttfc", "cpu16", "helpers16")
            }
            try:
                slow = SLOW_RESPONSES_BODY if target.responses else SLOW_BODY
                streamed = check_streaming(target.port, target.path, target.headers, slow)
                results[name]["streamed"] = float(streamed)
            except (OSError, ValueError) as exc:
                print(f"{name}: streaming not checked: {exc}", flush=True)
                results[name]["streamed"] = None
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        pg_count = postgres_records(pg_url) if pg_url else None
        if cluster is not None:
            cluster.stop()
    records: dict[str, int] = {}
    for name, home in homes.items():
        db = home / "records.sqlite3"
        if db.exists():
            with sqlite3.connect(db) as conn:
                records[name] = conn.execute("SELECT COUNT(*) FROM records").fetchone()[0]
    if pg_count is not None:
        records[POSTGRES_ROW] = pg_count
    d = results.get("direct", {})
    print()
    print(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(
        f"{'target':<22} {'p50 ms':>8} {'+p50 ms':>8} {'p99 ms':>8} {'+p99 ms':>8} "
        f"{'c=16 req/s':>11} {'c=16 p99':>9} {'TTFC ms':>8} {'+TTFC':>7} streamed "
        f"{'CPU us/req':>10} {'+helpers':>9}"
    )
    for name, r in results.items():
        shown = {None: "n/a", 0.0: "NO"}.get(r.get("streamed"), "yes")
        ref = results.get(bases.get(name, "direct"), {})  # +columns: against its direct row
        print(
            f"{name:<22} {fmt(r['p50'], '8.3f')} {fmt(diff(r['p50'], ref.get('p50')), '8.3f')} "
            f"{fmt(r['p99'], '8.3f')} {fmt(diff(r['p99'], ref.get('p99')), '8.3f')} "
            f"{fmt(r['rps16'], '11.0f')} {fmt(r['p99_16'], '9.3f')} {fmt(r['ttfc'], '8.3f')} "
            f"{fmt(diff(r['ttfc'], ref.get('ttfc')), '7.3f')} {shown:<8} "
            f"{fmt(r.get('cpu16'), '10.1f')} {fmt(r.get('helpers16'), '9.1f')}"
        )
    for name, reason in why_not.items():
        if name not in results:
            print(f"{name:<22} no result: {reason}")
    print()
    for name, count in records.items():
        print(f"{name} recorded {count} exchanges during the run")
    for line in responses_ratios(results):
        print(line)
    for line in store_ratios(results):
        print(line)
    b, reef = results.get("bare relay"), results.get("reef serve")
    if not (d and b and reef) or None in (d["p50"], b["p50"], reef["p50"]):
        print("no ratios: direct, bare relay or reef serve has no result")
        shutil.rmtree(tmp, ignore_errors=True)
        return
    added_b = max(b["p50"] - d["p50"], 0.001)  # type: ignore[operator]
    added_r = reef["p50"] - d["p50"]  # type: ignore[operator]
    print(f"ratio added p50, reef / bare relay: {added_r / added_b:.2f}  (target <= 2)")
    print(
        f"ratio c=16 throughput, reef / bare relay: {reef['rps16'] / b['rps16']:.2f}  (target >= 0.5)"  # type: ignore[operator]
    )
    print(
        f"p99 c=1, reef / bare relay: {reef['p99']:.3f} / {b['p99']:.3f} ms; "
        f"c=16: {fmt(reef['p99_16'], '.3f')} / {fmt(b['p99_16'], '.3f')} ms"
    )
    for line in cpu_lines(results):
        print(line)
    loop = results.get("reef: live-loop")
    if loop and loop["p50"] is not None and loop["rps16"]:
        added_l = loop["p50"] - d["p50"]  # type: ignore[operator]
        print(
            f"ratio added p50, reef live loop / bare relay: {added_l / added_b:.2f}  "
            f"(target <= 2); / reef serve: {added_l / max(added_r, 0.001):.2f}"
        )
        print(
            f"ratio c=16 throughput, reef live loop / bare relay: "
            f"{loop['rps16'] / b['rps16']:.2f}; / reef serve: "  # type: ignore[operator]
            f"{loop['rps16'] / reef['rps16']:.2f}"  # type: ignore[operator]
        )
    for name, r in results.items():
        if name.startswith("reef: ") and r["p99"] is not None:
            print(
                f"{name}: p99 c=1 {r['p99']:.3f} ms vs reef serve {reef['p99']:.3f}; "
                f"c=16 req/s {fmt(r['rps16'], '.0f')} vs {fmt(reef['rps16'], '.0f')}"
            )
    for other in ("nginx", "litellm", "portkey"):
        o = results.get(other)
        if o and o["rps16"] and o["p50"] is not None:
            print(
                f"ratio c=16 throughput, reef / {other}: {reef['rps16'] / o['rps16']:.2f}; "  # type: ignore[operator]
                f"added p50 {other}: {o['p50'] - d['p50']:.3f} ms"  # type: ignore[operator]
            )
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

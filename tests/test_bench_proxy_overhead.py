"""Item 20 (part): bench/proxy_overhead.py parses every wrk output it may get, and says
so instead of crashing when a figure is missing."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[1] / "bench" / "proxy_overhead.py"
spec = importlib.util.spec_from_file_location("proxy_overhead", PATH)
assert spec and spec.loader
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

# The output that crashed the bench: the Thread Stats line ends in "93.50%", which the old
# pattern took for the 50th percentile (and then failed to parse "Req/Sec").
WRK = """Running 3s test @ http://127.0.0.1:1/v1/chat/completions
  1 threads and 1 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    41.93us   13.40us   1.03ms   93.50%
    Req/Sec    22.37k   599.00    23.07k    99.00%
  Latency Distribution
     50%   40.00us
     75%   43.00us
     90%   47.00us
     99%    1.20ms
  67085 requests in 3.00s, 17.02MB read
Requests/sec:  22361.29
Transfer/sec:      5.67MB
"""


def test_parses_the_distribution_not_the_thread_stats() -> None:
    assert bench.parse_wrk(WRK) == {"rps": 22361.29, "p50": 0.04, "p99": 1.2}


@pytest.mark.parametrize(
    ("text", "ms"),
    [("812.00us", 0.812), ("1.20ms", 1.2), ("2.01s", 2010.0), ("1.50m", 90000.0)],
)
def test_units(text: str, ms: float) -> None:
    assert bench.parse_ms(text) == pytest.approx(ms)


@pytest.mark.parametrize("text", [None, "", "Req/Sec", "-nan", "1.0xs", "..ms"])
def test_unparsable_latency_is_none(text: str | None) -> None:
    assert bench.parse_ms(text) is None


@pytest.mark.parametrize(
    "out",
    [
        "unable to connect to 127.0.0.1:1 Connection refused\n",
        WRK.replace("     50%   40.00us\n", ""),
        WRK.replace("1.20ms", "-nan"),
        WRK.replace("Requests/sec:  22361.29\n", ""),
    ],
)
def test_a_missing_figure_is_reported_not_a_crash(out: str) -> None:
    with pytest.raises(bench.Unparsable, match="cannot parse wrk output"):
        bench.parse_wrk(out)
    assert issubclass(bench.Unparsable, RuntimeError)  # the bench drops the sample, goes on


# ---------------------------------------------------------------- the Responses rows

RESULTS = {
    "direct": {"p50": 0.5, "rps16": 9000.0},
    "bare relay": {"p50": 0.9, "rps16": 4000.0},
    "reef serve": {"p50": 1.3, "rps16": 3000.0},
    "reef: responses": {"p50": 1.7, "rps16": 2500.0},
    "direct: responses": {"p50": 0.6, "rps16": 8000.0},
    "bare relay: responses": {"p50": 1.1, "rps16": 3800.0},
    "reef: responses relay": {"p50": 1.6, "rps16": 2900.0},
}


def test_responses_ratios_against_the_bare_relay_of_the_run() -> None:
    lines = bench.responses_ratios(RESULTS)
    assert lines == [
        "ratio added p50, reef responses (translated to chat) / bare relay: 3.00  "
        "(target <= 2); added 1.200 vs 0.400 ms",
        "ratio c=16 throughput, reef responses (translated to chat) / bare relay: 0.62  "
        "(target >= 0.5)",
        "ratio added p50, reef responses relay / bare relay: responses: 2.00  "
        "(target <= 2); added 1.000 vs 0.500 ms",
        "ratio c=16 throughput, reef responses relay / bare relay: responses: 0.76  "
        "(target >= 0.5)",
    ]


def test_responses_ratios_say_what_is_missing() -> None:
    partial = {k: v for k, v in RESULTS.items() if k != "bare relay: responses"}
    lines = bench.responses_ratios(partial)
    assert lines[-1] == "no ratio for reef: responses relay: bare relay: responses has no result"
    assert len(lines) == 3
    left_out = {k: v for k, v in RESULTS.items() if "responses" not in k}
    assert bench.responses_ratios(left_out) == []  # --no-responses: no lines at all


def _upstream_app() -> object:
    namespace: dict[str, object] = {"__name__": "bench_upstream"}  # not __main__: no uvicorn.run
    exec(compile(bench.UPSTREAM_APP, "bench_upstream", "exec"), namespace)
    return namespace["app"]


def test_the_scripted_upstream_speaks_the_responses_api() -> None:
    """What the Responses rows measure against: an answer and a stream the official SDK
    reads to the end, from the bench's own upstream."""
    import openai

    from tests.fakes.server_thread import ServerThread

    with ServerThread(_upstream_app()) as srv:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0)
        request = json.loads(bench.RESPONSES_BODY)
        assert client.responses.create(**request).output_text == "Hi!"
        with client.responses.stream(**request) as stream:
            deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
            final = stream.get_final_response()
        assert len(deltas) == 20 and final.output_text == "".join(deltas)
        assert final.usage is not None and final.usage.total_tokens == 7
        slow = json.loads(bench.SLOW_RESPONSES_BODY)
        marker = {"slow": slow.pop("slow")}  # not an SDK parameter: sent as an extra
        events = list(client.responses.create(**slow, extra_body=marker))
        assert [e.type for e in events].count("response.output_text.delta") == 5
        assert events[-1].type == "response.completed"
        chat = client.chat.completions.create(**json.loads(bench.BODY))
        assert chat.choices[0].message.content == "Hi!"


def test_the_bare_relay_with_a_responses_route(tmp_path: Path) -> None:
    """The `bare relay: responses` row: bench/bare_relay.py as it is, plus the route."""
    import subprocess
    import sys

    import httpx

    from tests.fakes.server_thread import ServerThread

    script = tmp_path / "relay.py"
    script.write_text(bench.RELAY_APP)
    port = bench.free_port()
    with ServerThread(_upstream_app()) as up:
        relay = PATH.parent / "bare_relay.py"
        proc = subprocess.Popen(
            [sys.executable, str(script), str(port), up.url, str(relay)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            bench.wait_port(port, proc, timeout=30)
            url = f"http://127.0.0.1:{port}/v1/responses"
            r = httpx.post(url, content=bench.RESPONSES_BODY, timeout=10)
            assert r.status_code == 200 and r.json()["output"][0]["content"][0]["text"] == "Hi!"
            r = httpx.post(url, content=bench.RESPONSES_STREAM_BODY, timeout=10)
            assert r.headers["content-type"].startswith("text/event-stream")
            assert r.text.count("event: response.output_text.delta") == 20
            chat = f"http://127.0.0.1:{port}/v1/chat/completions"
            assert httpx.post(chat, content=bench.BODY, timeout=10).json()["model"] == "m"
        finally:
            proc.terminate()
            proc.wait(10)


def test_cpu_of_reads_a_process_and_the_helpers_it_started() -> None:
    import os
    import subprocess
    import sys

    busy = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import subprocess, sys; subprocess.run([sys.executable, '-c', {busy!r}])",
        ]
    )
    try:
        for _ in range(200):  # until the helper is there
            reading = bench.cpu_of(parent.pid)
            if reading is not None and reading[1]:
                break
            subprocess.run(["sleep", "0.01"], check=True)
        assert reading is not None and len(reading[1]) == 1
        parent.wait(30)
    finally:
        parent.kill()
    assert bench.cpu_of(None) is None
    assert bench.cpu_of(os.getpid()) is not None


def test_per_request_splits_own_and_helper_time() -> None:
    before = (1.0, {7: 2.0, 8: 5.0})
    after = (1.5, {7: 2.25, 9: 1.0})  # 8 ended, 9 is new: neither is counted
    own, helpers = bench.per_request(before, after, 1000)
    assert own == pytest.approx(500.0)
    assert helpers == pytest.approx(250.0)
    assert bench.per_request(None, after, 1000) == (None, None)
    assert bench.per_request(before, after, 0) == (None, None)


def test_cpu_lines_compare_reef_rows_with_the_relay() -> None:
    results = {
        "bare relay": {"p50": 0.5, "cpu16": 400.0, "helpers16": 0.0},
        "reef serve": {"p50": 0.7, "cpu16": 600.0, "helpers16": 200.0},
        "reef: no-record": {"p50": 0.6, "cpu16": 500.0, "helpers16": 0.0},
        "nginx": {"p50": 0.3, "cpu16": 100.0, "helpers16": 0.0},
    }
    assert bench.cpu_lines(results) == [
        "CPU per request at c=16, reef serve / bare relay: 1.50 (serving process), "
        "2.00 with its record writer",
        "CPU per request at c=16, reef: no-record / bare relay: 1.25 (serving process)",
    ]
    assert bench.cpu_lines({"reef serve": results["reef serve"]}) == []

"""Item 20 (part): bench/proxy_overhead.py parses every wrk output it may get, and says
so instead of crashing when a figure is missing."""

from __future__ import annotations

import importlib.util
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

"""bench/proxy_overhead.py's `reef: postgresql` row: its ratios against the bare relay and
against reef serve on SQLite, from the same run's results."""

from __future__ import annotations

import importlib.util
from pathlib import Path

PATH = Path(__file__).resolve().parents[1] / "bench" / "proxy_overhead.py"
spec = importlib.util.spec_from_file_location("proxy_overhead_stores", PATH)
assert spec and spec.loader
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

RESULTS = {
    "direct": {"p50": 0.5, "p99": 1.0, "rps16": 9000.0, "p99_16": 2.0},
    "bare relay": {"p50": 0.9, "p99": 1.5, "rps16": 4000.0, "p99_16": 5.0},
    "reef serve": {"p50": 1.3, "p99": 2.0, "rps16": 3000.0, "p99_16": 20.0},
    "reef: postgresql": {"p50": 1.7, "p99": 4.0, "rps16": 2400.0, "p99_16": 30.0},
}


def test_postgresql_against_the_bare_relay_and_sqlite() -> None:
    # added p50: 1.2 ms vs the relay's 0.4 and SQLite's 0.8; throughput 2400 vs 4000 and 3000
    assert bench.store_ratios(RESULTS) == [
        "ratio added p50, reef postgresql / bare relay: 3.00  (target <= 2); "
        "/ reef serve (sqlite): 1.50; added 1.200 vs 0.800 ms (sqlite)",
        "ratio c=16 throughput, reef postgresql / bare relay: 0.60  (target >= 0.5); "
        "/ reef serve (sqlite): 0.80",
        "p99 c=1, reef postgresql / reef serve (sqlite): 4.000 / 2.000 ms; "
        "c=16: 30.000 / 20.000 ms",
    ]


def test_a_missing_reference_row_is_named() -> None:
    partial = {k: v for k, v in RESULTS.items() if k != "reef serve"}
    assert bench.store_ratios(partial) == [
        "no ratio for reef: postgresql: reef serve has no result"
    ]


def test_no_postgresql_row_no_lines() -> None:
    # --no-postgres, or PostgreSQL not installed (the skip line says so): nothing here
    assert bench.store_ratios({k: v for k, v in RESULTS.items() if "postgresql" not in k}) == []

"""Start-up cost of a sandboxed `true`, as a ratio to a bare subprocess, measured side by
side in one run (not a test). Targets: Reef's profile <= 8x, with pasta <= 30x.

    /work/main/.venv/bin/python bench/sandbox_overhead.py [--runs N]
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sandbox


def timed(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm-up
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=40)
    runs = ap.parse_args().runs
    true = shutil.which("true") or "/bin/true"
    wd = tempfile.mkdtemp(prefix="reef-bench-")
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    cases: list[tuple[str, Callable[[], object]]] = [
        ("bare subprocess `true`", lambda: subprocess.run([true], check=True)),
    ]
    if shutil.which("unshare"):
        cases.append(
            (
                "unshare -Urn true (reference)",
                lambda: subprocess.run(["unshare", "-Urn", true], check=True),
            )
        )
    bwrap = shutil.which("bwrap")
    if bwrap:
        raw = [
            bwrap,
            "--ro-bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--unshare-all",
            "--unshare-user",
            "--die-with-parent",
            true,
        ]
        cases.append(
            ("raw bwrap --unshare-all true (reference)", lambda: subprocess.run(raw, check=True))
        )
        cases.append(("reef sandbox.run(['true'])", lambda: _ok(sandbox.run([true], wd))))
        if shutil.which("pasta"):
            cases.append(
                (
                    "reef sandbox.run(['true'], allow=port) (bwrap + pasta)",
                    lambda: _ok(sandbox.run([true], wd, allow=[("127.0.0.1", port)])),
                )
            )
    results = [(name, timed(fn, runs)) for name, fn in cases]
    base = results[0][1]
    print(f"median of {runs} runs each, same process, {time.strftime('%Y-%m-%d %H:%M')}")
    for name, secs in results:
        print(f"{name:<58} {secs * 1000:8.2f} ms  {secs / base:6.1f}x")
    srv.close()
    shutil.rmtree(wd, ignore_errors=True)


def _ok(res: sandbox.Result) -> None:
    if res.returncode != 0:
        raise SystemExit(f"sandboxed true failed: {res.stderr.strip()}")


if __name__ == "__main__":
    main()

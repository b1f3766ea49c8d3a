"""Start-up cost of a sandboxed `true`, as a ratio to a bare subprocess, measured side by
side in one run (not a test). Targets: Reef's profile <= 8x, with pasta <= 30x.

Each case runs in a tight loop of its own, as the issue's reference figures were taken
(raw bwrap ~6.4x): sampling the cases round-robin lets one case's asynchronous clean-up
(a network namespace torn down by the kernel, pasta exiting) slow the next case's sample,
and a pause before each sample makes a bare `true` pay for a cold CPU; both flatter the
ratios.
As root, "pasta alone" shows pasta's own floor: spawn to listening on a ready namespace.
"fresh python" pairs show what a new process's first run adds (it starts the caller's
watchdog, once per process).

    /work/main/.venv/bin/python bench/sandbox_overhead.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
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


def timed(fn: Callable[[], float], runs: int) -> float:
    """Median seconds of ``runs`` back-to-back samples (after one warm-up)."""
    fn()
    return statistics.median(fn() for _ in range(runs))


def clock(fn: Callable[[], object]) -> Callable[[], float]:
    def sample() -> float:
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    return sample


def pasta_alone(pasta: str, port: int) -> float:
    """Seconds from spawning pasta to its port listening, on a namespace made beforehand."""
    from sandbox import _pasta

    script = "ip link set lo up && echo up && exec sleep 30"
    holder = subprocess.Popen(["unshare", "--net", "sh", "-c", script], stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdout.readline() == b"up\n"
    netns = _pasta.NetnsFile(f"/proc/{holder.pid}/ns/net")
    try:
        t = time.perf_counter()
        proc = _pasta.start(pasta, [port], netns.path)
        _pasta.wait_listening(proc, holder.pid, [port])
        took = time.perf_counter() - t
        _pasta.stop(proc)
        return took
    finally:
        holder.kill()
        holder.wait()
        netns.close()


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
    timers: list[tuple[str, Callable[[], float]]] = []
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
        # A fresh process's first run also starts the caller's watchdog (once per process).
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        first = f"import sandbox; sandbox.run([{true!r}], {wd!r})"
        cases.append(
            (
                "fresh python: import sandbox (reference)",
                lambda: subprocess.run(
                    [sys.executable, "-c", "import sandbox"], env=env, check=True
                ),
            )
        )
        cases.append(
            (
                "fresh python: import sandbox + first run",
                lambda: subprocess.run([sys.executable, "-c", first], env=env, check=True),
            )
        )
    pasta = shutil.which("pasta")
    if pasta and os.geteuid() == 0:
        timers.append(
            ("pasta alone: spawn -> listening (reference)", lambda: pasta_alone(pasta, port))
        )
    all_cases = [(name, clock(fn)) for name, fn in cases] + timers
    results = [(name, timed(fn, runs)) for name, fn in all_cases]
    base = results[0][1]
    when = time.strftime("%Y-%m-%d %H:%M")
    print(f"median of {runs} back-to-back runs per case, same process, {when}")
    for name, secs in results:
        print(f"{name:<58} {secs * 1000:8.2f} ms  {secs / base:6.1f}x")
    srv.close()
    shutil.rmtree(wd, ignore_errors=True)


def _ok(res: sandbox.Result) -> None:
    if res.returncode != 0:
        raise SystemExit(f"sandboxed true failed: {res.stderr.strip()}")


if __name__ == "__main__":
    main()

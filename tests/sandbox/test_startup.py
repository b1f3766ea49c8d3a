"""What the start-up optimisations must not lose: limits set with prlimit(2) on the held
sandbox instead of a preexec_fn, the sandbox and pasta dying with their caller, and pasta
gone after a run although it is reaped lazily."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from sandbox import Limits

from .conftest import host_pids_with, needs_bwrap, needs_pasta, py

pytestmark = needs_bwrap
REPO = Path(__file__).resolve().parents[2]


def test_rlimits_hold_inside(work: Path) -> None:
    code = "print(open('/proc/self/limits').read())"
    res = py(code, work, limits=Limits(cpu_s=7, file_mb=3, open_files=77, memory_mb=900))
    assert res.returncode == 0, res.stderr
    rows = {" ".join(ln.split()[:-3]): ln.split()[-3:-1] for ln in res.stdout.splitlines()[1:]}
    assert rows["Max cpu time"] == ["7", "8"]
    assert rows["Max file size"] == [str(3 << 20)] * 2
    assert rows["Max open files"] == ["77", "77"]
    assert rows["Max address space"] == [str(900 << 20)] * 2
    assert rows["Max core file size"] == ["0", "0"]


def test_nproc_counts_only_what_the_policy_allows(work: Path) -> None:
    code = "print(open('/proc/self/limits').read())"
    res = py(code, work, limits=Limits(pids=33))
    assert res.returncode == 0, res.stderr
    row = next(ln for ln in res.stdout.splitlines() if ln.startswith("Max processes"))
    soft = int(row.split()[2])
    # 33 for the command, plus what the sandbox uid already runs on the host (as root)
    # or the sandbox's PID 1 (as a user): never unlimited, never below the policy.
    assert 33 <= soft <= 33 + len(os.listdir("/proc")), row


def _kill_caller_mid_run(work: Path, allow: bool) -> None:
    """Start a caller whose sandbox sleeps, SIGKILL the caller, and check that neither the
    sandboxed command nor (with a port allowed) its pasta outlives it."""
    tag = uuid.uuid4().hex
    marker = f"reef-caller-death-{tag}"
    # The marker is assembled in the caller, so only the sandboxed command line holds it.
    code = (
        "import socket, sys, sandbox\n"
        "srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(1)\n"
        "allow = [('127.0.0.1', srv.getsockname()[1])] if sys.argv[3] == '1' else []\n"
        "cmd = ['sh', '-c', 'sleep 300 # reef-caller-death-' + sys.argv[2]]\n"
        "sandbox.run(cmd, sys.argv[1], allow=allow)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-c", code, str(work), tag, "1" if allow else "0"]
    pastas_before = set(host_pids_with("reef-netns-"))
    caller = subprocess.Popen(argv, env=env)
    try:
        deadline = time.monotonic() + 20
        while not host_pids_with(f"# {marker}") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert host_pids_with(f"# {marker}"), "the sandboxed command never started"
        caller.send_signal(signal.SIGKILL)
        caller.wait()
        deadline = time.monotonic() + 5
        while host_pids_with(f"# {marker}") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert host_pids_with(f"# {marker}") == []
        if allow:
            while set(host_pids_with("reef-netns-")) - pastas_before:
                assert time.monotonic() < deadline + 5, "pasta outlived its caller"
                time.sleep(0.05)
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()
        # Whatever survived (an xfail below) must not leak into the next test.
        for pid in host_pids_with(f"# {marker}") + [
            p for p in host_pids_with("reef-netns-") if p not in pastas_before
        ]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_sandbox_dies_with_its_caller(work: Path) -> None:
    _kill_caller_mid_run(work, allow=False)


@needs_pasta
@pytest.mark.xfail(
    strict=False,
    reason="known gap (docs/sandbox.md): when bwrap holds the sandbox on --block-fd for tens "
    "of ms (pasta starting) and the machine is loaded, the sandbox's PID 1 can survive its "
    "caller's SIGKILL; reproduced with the previous sandbox/ too",
)
def test_sandbox_and_pasta_die_with_their_caller(work: Path) -> None:
    _kill_caller_mid_run(work, allow=True)


@needs_pasta
def test_pasta_does_not_outlive_the_run(work: Path) -> None:
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    try:
        res = py("print('ok')", work, allow=[("127.0.0.1", srv.getsockname()[1])])
    finally:
        srv.close()
    assert res.returncode == 0, res.stderr
    deadline = time.monotonic() + 5
    while host_pids_with("reef-netns-") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_pids_with("reef-netns-") == []

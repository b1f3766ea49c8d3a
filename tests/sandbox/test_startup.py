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
from typing import Any

import pytest

from sandbox import Limits
from tests.sandbox.runs import runs_for

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


# Code the caller runs (argv: work dir, tag, allow, hold). ``hold`` keeps bwrap held on
# --block-fd: "rlimits" while the rlimits are set, "pasta" once pasta listens (held right
# after its start, a pasta that failed went unnoticed: the test saw no pasta and no reason;
# wait_listening raises with pasta's own words); the caller prints HELD and is killed there.
# The marker is assembled in the caller, so only the sandbox's command lines (bwrap's, its
# held PID 1's, the command's) hold it.
CALLER = """
import socket, sys, time, sandbox
from sandbox import _limits, _pasta
wd, tag, allow, hold = sys.argv[1:5]

def held(fn):
    def wrapper(*a, **k):
        out = fn(*a, **k)
        print("HELD", flush=True)
        time.sleep(300)
        return out
    return wrapper

if hold == "rlimits":
    _limits.apply_to = held(_limits.apply_to)
if hold == "pasta":
    _pasta.wait_listening = held(_pasta.wait_listening)
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
ports = [("127.0.0.1", srv.getsockname()[1])] if allow == "1" else []
cmd = ["sh", "-c", "sleep 300 # reef-caller-death-" + tag]
sandbox.run(cmd, wd, allow=ports)
"""


def _commands(marker: str) -> list[int]:
    """The sandboxed command itself (``sh -c …``), not bwrap, whose argv holds it too."""
    found = []
    for pid in host_pids_with(marker):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as fh:
            if fh.read().startswith(b"sh\0-c\0"):
                found.append(pid)
    return found


def _running(pid: int) -> bool:
    """``pid`` is still a live (not zombie) setpriv/pasta process."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            comm, rest = fh.read().rsplit(")", 1)
    except OSError:
        return False
    alive = rest.split()[0] != "Z"
    return alive and any(name in comm for name in ("pasta", "passt", "setpriv"))


def _kill_caller_mid_run(work: Path, allow: bool, hold: str = "") -> None:
    """Start a caller whose sandbox sleeps (or is still held), SIGKILL the caller, and check
    that neither the sandbox nor (with a port allowed) its pasta outlives it, and that the
    work dir is handed back and the run's temp dir removed."""
    tag = uuid.uuid4().hex
    marker = f"reef-caller-death-{tag}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-c", CALLER, str(work), tag, "1" if allow else "0", hold]
    owner = os.stat(work).st_uid
    caller = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
    try:
        if hold:
            assert caller.stdout is not None
            assert caller.stdout.readline().strip() == "HELD", "the caller never held bwrap"
        deadline = time.monotonic() + 20
        while not host_pids_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert host_pids_with(marker), "the sandbox never started"
        if not hold:
            while not _commands(marker) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _commands(marker), "the sandboxed command never started"
        runs = runs_for(work)
        assert len(runs) == 1, runs
        # pasta's command line names the run's dir (its pinned namespace file); it reads
        # empty for a moment while pasta re-execs itself, hence the wait.
        netns = f"{runs[0]}/netns"
        while allow and not host_pids_with(netns) and time.monotonic() < deadline:
            time.sleep(0.01)
        pastas = host_pids_with(netns)
        assert bool(pastas) == allow, f"pasta processes: {pastas}"
        if hold:
            # held: bwrap and its PID 1 are there, the command has not started
            assert _commands(marker) == []
        caller.send_signal(signal.SIGKILL)
        caller.wait()
        killed_at = time.time()
        deadline = time.monotonic() + 5
        while host_pids_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert host_pids_with(marker) == [], "bwrap or the command outlived its caller"
        while [p for p in pastas if _running(p)] or host_pids_with(netns):
            assert time.monotonic() < deadline + 5, "pasta outlived its caller"
            time.sleep(0.05)
        # The watchdog hands the work dir back and removes the run's dir right away.
        while (runs[0].exists() or os.stat(work).st_uid != owner) and (
            time.monotonic() < deadline + 10
        ):
            time.sleep(0.05)
        assert os.stat(work).st_uid == owner, "the work dir was not handed back"
        assert runs_for(work) == [] and not runs[0].exists(), (
            f"{runs[0]} was left (caller killed at {killed_at:.3f}): "
            f"{[(d, f) for d, _, f in os.walk(runs[0])]}"
        )
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()
        # Whatever survived (a failure above) must not leak into the next test.
        for pid in host_pids_with(marker) + [
            p for run in runs_for(work) for p in host_pids_with(f"{run}/netns")
        ]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_sandbox_dies_with_its_caller(work: Path) -> None:
    _kill_caller_mid_run(work, allow=False)


@needs_pasta
def test_sandbox_and_pasta_die_with_their_caller(work: Path) -> None:
    _kill_caller_mid_run(work, allow=True)


def test_a_held_sandbox_dies_with_its_caller(work: Path) -> None:
    # Before the watchdog, an EOF on --block-fd (the dead caller's end) released the held
    # sandbox with no parent-death signal set: the command ran on, reparented to init.
    _kill_caller_mid_run(work, allow=False, hold="rlimits")


@needs_pasta
def test_a_sandbox_held_for_pasta_dies_with_its_caller(work: Path) -> None:
    _kill_caller_mid_run(work, allow=True, hold="pasta")


@needs_pasta
def test_pasta_does_not_outlive_the_run(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from sandbox import _pasta

    started: list[int] = []
    start = _pasta.start

    def spy(*args: Any, **kw: Any) -> subprocess.Popen[bytes]:
        proc = start(*args, **kw)
        started.append(proc.pid)
        return proc

    monkeypatch.setattr(_pasta, "start", spy)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    try:
        res = py("print('ok')", work, allow=[("127.0.0.1", srv.getsockname()[1])])
    finally:
        srv.close()
    assert res.returncode == 0, res.stderr
    assert len(started) == 1

    def alive() -> bool:
        try:
            with open(f"/proc/{started[0]}/cmdline", "rb") as fh:
                return b"pasta" in fh.read()
        except OSError:
            return False

    deadline = time.monotonic() + 5
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive()

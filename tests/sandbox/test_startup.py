"""What the start-up optimisations must not lose: limits set without a preexec_fn, the
sandbox dying with its caller, and pasta gone after a run although it is reaped lazily."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

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


def test_sandbox_dies_with_its_caller(work: Path) -> None:
    tag = uuid.uuid4().hex
    marker = f"reef-caller-death-{tag}"
    # The marker is assembled in the caller, so only the sandboxed command line holds it.
    code = (
        "import sys, sandbox\n"
        "sandbox.run(['sh', '-c', 'sleep 300 # reef-caller-death-' + sys.argv[2]], sys.argv[1])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    caller = subprocess.Popen([sys.executable, "-c", code, str(work), tag], env=env)
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
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()


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

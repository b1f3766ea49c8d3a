"""Issue 11, item 9: a run hands the work dir back - owners, and no set-id bit it added on
a file or a directory - and a run whose caller (and watchdog) died is cleaned up by the
next run at the latest, without touching runs that are still alive."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

import sandbox
from reef_cli.core.errors import SandboxError
from sandbox import _runs
from tests.sandbox.runs import runs_for

from .conftest import host_pids_with, needs_bwrap

pytestmark = needs_bwrap
REPO = Path(__file__).resolve().parents[2]
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only a root caller lends the work dir")
SETID = stat.S_ISUID | stat.S_ISGID
MAKE_SETID = "mkdir sg && chmod 2775 sg && mkdir sg/deeper && touch f && chmod 6755 f"


@as_root
def test_set_id_bits_the_run_added_are_stripped_from_files_and_dirs(work: Path) -> None:
    (work / "kept").mkdir()
    os.chmod(work / "kept", 0o2755)  # the person's own set-gid dir keeps its bit
    res = sandbox.run(["sh", "-c", f"{MAKE_SETID} && chmod 2775 kept; ls -ld sg"], work)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("drwxrwsr-x"), res.stdout  # it was set inside
    for rel in ("sg", "sg/deeper", "f"):
        st = os.lstat(work / rel)
        assert st.st_mode & SETID == 0, (rel, oct(st.st_mode))
        assert st.st_uid == os.stat(work).st_uid == 0
    assert os.lstat(work / "kept").st_mode & stat.S_ISGID
    assert runs_for(work) == []


def _start_caller(work: Path, marker: str) -> subprocess.Popen[bytes]:
    code = (
        "import sys, sandbox\n"
        "cmd = ['sh', '-c', sys.argv[2] + ' && sleep 300 # ' + sys.argv[3] + sys.argv[4]]\n"
        "sandbox.run(cmd, sys.argv[1])\n"
    )
    head, tail = marker[:8], marker[8:]  # only the sandbox's command lines hold it whole
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-c", code, str(work), MAKE_SETID, head, tail]
    return subprocess.Popen(argv, env=env)


def _watchdog_of(caller: int) -> int | None:
    for pid in host_pids_with("_watchdog.py"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as fh:
            if int(fh.read().rsplit(")", 1)[1].split()[1]) == caller:
                return pid
    return None


def _setid_made(work: Path) -> object:
    """True once MAKE_SETID has run to its end (``f`` has its set-uid bit)."""

    def made() -> bool:
        try:
            return bool(os.lstat(work / "f").st_mode & stat.S_ISUID)
        except FileNotFoundError:
            return False

    return made


def _wait(cond: object, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


@as_root
def test_the_next_run_cleans_up_after_a_dead_caller_and_watchdog(
    work: Path, tmp_path: Path
) -> None:
    marker = f"reef-sweep-{uuid.uuid4().hex}"
    caller = _start_caller(work, marker)
    try:
        assert _wait(lambda: host_pids_with(f"# {marker}")), "the command never started"
        assert _wait(_setid_made(work)), "the command never made its set-id files"
        watchdog = _watchdog_of(caller.pid)
        assert watchdog is not None, "no watchdog runs for the caller"
        os.kill(watchdog, signal.SIGKILL)  # e.g. an OOM kill or `kill -9 -1`
        assert _wait(lambda: _watchdog_of(caller.pid) is None)
        caller.send_signal(signal.SIGKILL)
        caller.wait()
        # bwrap's --die-with-parent still takes the released sandbox ...
        assert _wait(lambda: not host_pids_with(marker), 5), "the sandbox outlived its caller"
        # ... but nothing cleaned up: the work dir is still lent, set-id bits are on.
        (run,) = runs_for(work)
        assert os.stat(work).st_uid == 65534 or os.environ.get("REEF_SANDBOX_UID")
        assert os.lstat(work / "sg").st_mode & stat.S_ISGID
        assert (run / "home").is_dir()
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()
    # A sweep leaves a run dir younger than YOUNG_S alone (it may not be locked yet).
    time.sleep(max(0.0, _runs.YOUNG_S - (time.time() - os.stat(run).st_ctime)) + 0.1)
    other = tmp_path / "other"
    other.mkdir()
    res = sandbox.run(["true"], other)  # the next run, from another process
    assert res.returncode == 0, res.stderr
    assert not run.exists()
    assert runs_for(work) == []
    for rel in ("", "sg", "sg/deeper", "f"):
        st = os.lstat(work / rel)
        assert (st.st_uid, st.st_gid) == (0, 0), rel
        assert st.st_mode & SETID == 0, (rel, oct(st.st_mode))


def test_a_sweep_leaves_live_runs_alone(work: Path) -> None:
    out: list[sandbox.Result] = []
    runner = threading.Thread(
        target=lambda: out.append(
            sandbox.run(["sh", "-c", "sleep 1.5; echo x > f; id -u > uid; echo done"], work)
        )
    )
    runner.start()
    try:
        assert _wait(lambda: bool(runs_for(work)), 10)
        (run,) = runs_for(work)
        owner_during = os.stat(work).st_uid
        _runs.sweep()  # may clean other, dead runs; never this one
        assert run.exists()
        assert os.stat(work).st_uid == owner_during  # not handed back under a live run
        assert _runs.reclaim(run) is False  # its caller holds the lock
    finally:
        runner.join(30)
    assert out and out[0].returncode == 0 and out[0].stdout.strip() == "done", out
    assert (work / "f").read_text() == "x\n"
    assert not run.exists()


def test_a_foreign_sandbox_temp_dir_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    base = tmp_path / f"reef-sandbox-{os.geteuid()}"
    base.mkdir(mode=0o777)
    os.chmod(base, 0o777)  # anyone could plant runs in it
    with pytest.raises(SandboxError, match="not a private directory"):
        _runs.base_dir()

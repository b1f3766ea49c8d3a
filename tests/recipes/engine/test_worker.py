"""``recipes.engine.worker.Worker``: every evolution job runs in a child process of its own, below
the server's CPU priority, so nothing a job does with untrusted text can hold the serving
process's GIL; stopping the worker (or the server, by SIGTERM or SIGKILL) stops the job's
whole process group, and a job whose process died is marked failed, never left running.

The job is a real Reefine evolve against the scripted model; the model's first answer
stalls, which holds the job in the middle of its work while the test looks at it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from recipes.engine.worker import INTERRUPTED, NICE, Worker
from reef_cli.core import jobs, scenarios, tokens
from reef_cli.core.publishing import publish_files
from reef_cli.core.tree import starter_tree
from tests.fakes.scripted import Scripted, draft_json, junk_draft

WAIT = 60.0  # an upper bound for what happens by itself, never a timing claim


def wait_for(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what} did not happen within {WAIT:g}s"
        time.sleep(0.05)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _nice(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def _job_processes(job_id: str) -> list[int]:
    """Live processes running this job (`python -m recipes.engine.worker JOB_ID …`)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"recipes.engine.worker" in argv and job_id.encode() in argv and _alive(int(entry.name)):
            found.append(int(entry.name))
    return found


@pytest.fixture
def stalled(scripted: Scripted, monkeypatch: pytest.MonkeyPatch) -> Iterator[Scripted]:
    """A scenario with a release, and a model whose first answer takes a minute."""
    monkeypatch.setenv("REEF_MODEL", "openai/scripted")
    monkeypatch.setenv("REEF_API_BASE", scripted.api_base)
    scenarios.create("shop")
    publish_files("shop", starter_tree().files(), reason="start")
    scripted.push(draft_json(), stall=WAIT)
    yield scripted


def _reefine_job() -> jobs.Job:
    return jobs.create("shop", "reefine", "reproduce bugs with a failing test first", "pi")


def _in_its_model_call(model: Scripted) -> None:
    wait_for(lambda: model.inference(), "the job's first model call")


def test_a_job_runs_in_its_own_process_below_the_servers_priority_and_stops_with_the_worker(
    stalled: Scripted,
) -> None:
    worker = Worker()
    worker.start()
    job = _reefine_job()
    worker.submit(job)
    _in_its_model_call(stalled)
    [pid] = _job_processes(job.id)
    assert pid != os.getpid()
    assert os.getpgid(pid) == pid  # it leads its own process group: its agents go with it
    assert _nice(pid) == min(19, _nice(os.getpid()) + NICE)
    assert jobs.get(job.id).state == "running"

    worker.stop()
    assert not _alive(pid)
    ended = jobs.get(job.id)
    assert (ended.state, ended.message) == ("failed", INTERRUPTED)


def test_a_job_whose_process_is_killed_is_failed_and_the_next_job_still_runs(
    stalled: Scripted,
) -> None:
    worker = Worker()
    worker.start()
    try:
        first = _reefine_job()
        worker.submit(first)
        _in_its_model_call(stalled)
        [pid] = _job_processes(first.id)
        os.kill(pid, signal.SIGKILL)
        ended = wait_for(
            lambda: (j := jobs.get(first.id)).state not in jobs.ACTIVE and j, "the first job's end"
        )
        assert ended.state == "failed"
        assert ended.message == "the job's process was killed (SIGKILL) before it finished"

        stalled.push(draft_json(), "I will write a failing test first.")  # no stall now
        second = _reefine_job()
        worker.submit(second)
        done = wait_for(
            lambda: (j := jobs.get(second.id)).state not in jobs.ACTIVE and j, "the second job"
        )
        assert "process" not in done.message, done  # it ran to an outcome of its own
    finally:
        worker.stop()


# ------------------------------------------------------------------ a real reef serve


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "reef_cli", "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        assert proc.poll() is None, "reef serve exited at start-up"
        try:
            return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(healthy, "reef serve's start")
    return proc


def _submit(port: int) -> str:
    response = httpx.post(
        f"http://127.0.0.1:{port}/reef/evolve",
        json={"scenario": "shop", "ask": "reproduce bugs with a failing test first"},
        headers={"authorization": f"Bearer {tokens.main_token(create=False)}"},
        timeout=10,
    )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_stopped_or_killed_reef_serve_takes_its_running_job_with_it(
    stalled: Scripted, monkeypatch: pytest.MonkeyPatch, signum: int
) -> None:
    """SIGTERM: the server stops the job's process group and exits. SIGKILL: the kernel
    sends the orphaned job SIGTERM (PR_SET_PDEATHSIG), so no job outlives its server."""
    monkeypatch.setenv("REEF_UPSTREAM", stalled.api_base)
    port = _free_port()
    proc = _serve(port)
    try:
        job_id = _submit(port)
        _in_its_model_call(stalled)
        [pid] = wait_for(lambda: _job_processes(job_id), "the job's process")
        proc.send_signal(signum)
        proc.wait(timeout=WAIT)
        wait_for(lambda: not _alive(pid), "the job process's end")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if signum == signal.SIGTERM:
        ended = jobs.get(job_id)
        assert (ended.state, ended.message) == ("failed", INTERRUPTED)


def test_a_quickstart_job_runs_the_quickstart_flow(
    scripted: Scripted, monkeypatch: pytest.MonkeyPatch, reef_home: Path
) -> None:
    """The job the API queues takes `reef quickstart`'s steps: the scenario is created
    with the starter tree, pi gets it in its isolated folder, Reefine runs on the ask
    (here the model drafts junk twice, so the gate refuses and nothing more is
    published), and the job's outcome says what was installed where."""
    from recipes.engine.worker import run_job
    from reef_cli.core import paths

    monkeypatch.setenv("REEF_MODEL", "openai/scripted")
    monkeypatch.setenv("REEF_API_BASE", scripted.api_base)
    from reef_cli.core.asks import QUICKSTART_ASK

    scripted.push(junk_draft(), junk_draft())
    job = jobs.create("qs", jobs.QUICKSTART_RECIPE, QUICKSTART_ASK, flow="quickstart")
    ended = run_job(job)
    assert ended.state == "rejected", ended.message
    assert ended.outcome["quickstart"] == {
        "scenario": "qs",
        "agent": "pi",
        "installed": 1,
        "where": str(paths.agent_dir("pi", "qs")),
        "after": None,
    }
    chain = scenarios.get("qs").chain()
    latest = chain.latest()
    assert latest is not None and latest.number == 1  # the starter tree only
    assert (paths.agent_dir("pi", "qs") / "AGENTS.md").is_file()
    assert jobs.get(job.id).state == "rejected"

"""The background worker `reef serve` runs evolution jobs on: one job at a time (the
embedded model is one model), each a call into ``recipes.engine.evolve`` in a child
process of its own (``python -m recipes.engine.worker JOB_ID``).

Why a process: a job runs untrusted text through pure-Python work — the credential scan
of every recorded turn, the quality checks, GEPA's bookkeeping — and a regex holds the
GIL for as long as it runs. In a thread of `reef serve` one slow call starved the event
loop (chats timed out, SIGTERM went unanswered). In a child at a lower CPU priority the
serving process keeps the GIL and the cores it needs; stopping the server stops the
child's whole process group (its sandboxed agents too), and a child whose server died
(even by SIGKILL) is sent SIGTERM by the kernel.

The job itself lives in the store: the child loads it by id, writes its progress and
outcome there, and the server reads them as before. A child that ends without settling
its job (killed, crashed) leaves it active; the worker then marks it failed.

``Worker`` implements ``reef_cli.core.jobs.JobRunner``; ``cli/serve.py`` hands it to the
server, which never imports recipes.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
from typing import Any

from recipes import engine, tasks
from recipes.base import Recipe
from recipes.engine import quickstart
from recipes.proposal import Proposal
from reef_cli.core import jobs, scenarios
from reef_cli.core.scenarios import Scenario

NICE = 10  # the child's CPU priority below the server's: serving answers first
STOP_GRACE_S = 5.0  # how long a stopped child may take to end before it is killed
INTERRUPTED = "the server stopped while this job ran; submit it again"


class Worker:
    def __init__(self) -> None:
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._child: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()

    def start(self) -> None:
        jobs.fail_interrupted(INTERRUPTED)
        self._stopping.clear()
        self._thread = threading.Thread(target=self._loop, name="reef-jobs", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """No new job starts; a running one is stopped (its process group gets SIGTERM,
        then SIGKILL after ``STOP_GRACE_S``) and marked failed."""
        self._stopping.set()
        self._queue.put(None)
        child = self._child
        if child is not None and child.poll() is None:
            _signal_group(child, signal.SIGTERM)
            try:
                child.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                _signal_group(child, signal.SIGKILL)
                child.wait()
        if self._thread is not None:
            self._thread.join(timeout=STOP_GRACE_S + 1)

    def submit(self, job: jobs.Job) -> None:
        self._queue.put(job.id)

    def _loop(self) -> None:
        while True:
            job_id = self._queue.get()
            if job_id is None or self._stopping.is_set():
                return
            self._run_in_child(job_id)

    def _run_in_child(self, job_id: str) -> None:
        command = [sys.executable, "-m", "recipes.engine.worker", job_id, str(os.getpid())]
        try:
            self._child = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, start_new_session=True
            )
        except OSError as exc:
            jobs.fail_if_active(job_id, f"could not start the job's process: {exc.strerror}")
            return
        code = self._child.wait()
        self._child = None
        if code != 0:
            why = INTERRUPTED if self._stopping.is_set() else _ended(code)
            jobs.fail_if_active(job_id, why)


def _signal_group(child: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the child leads its own session
        os.killpg(child.pid, signum)


def _ended(code: int) -> str:
    if code < 0:
        return f"the job's process was killed ({signal.Signals(-code).name}) before it finished"
    return f"the job's process ended (exit {code}) before it finished"


def run_job(job: jobs.Job) -> jobs.Job:
    """Run ``job`` through the engine (in the job's child process): its recipe, or the
    quickstart flow around a Reefine run."""

    def work(progress: jobs.Progress) -> dict[str, Any]:
        def evolve(scenario: Scenario, recipe: Recipe | None = None) -> engine.Outcome:
            return engine.evolve(
                engine.EvolveRequest(
                    scenario=scenario,
                    recipe=recipe if recipe is not None else job.recipe,
                    ask=job.ask,
                    adapter=job.adapter or "pi",
                    tasks=tasks.for_scenario(scenario),
                    recipe_options=job.options,
                    publish="review" if job.publish == "review" else "auto",
                    progress=progress,
                )
            )

        if job.flow == "quickstart":
            done = quickstart.run(job.scenario, job.ask or "", evolve=evolve)
            return {**done.outcome.to_json(), "quickstart": done.to_json()}
        if job.flow == "proposal":
            proposed = Proposal(job.options.get("files") or {}, job.ask or "")
            return evolve(scenarios.get(job.scenario), proposed).to_json()
        return evolve(scenarios.get(job.scenario)).to_json()

    return jobs.execute(job, work)


def _die_with(parent: int) -> None:
    """Have the kernel send this process SIGTERM when ``parent`` dies (Linux), and exit
    now if it already has."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        raise SystemExit(1)


def main(argv: list[str]) -> int:
    """The child: run job ``argv[0]`` for the server whose pid is ``argv[1]``."""
    job_id, parent = argv[0], int(argv[1])
    _die_with(parent)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    with contextlib.suppress(OSError):
        os.nice(NICE)
    from reef_cli.server.run import configure_logging

    configure_logging()  # the server's redaction: no log line names a credential
    run_job(jobs.get(job_id))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

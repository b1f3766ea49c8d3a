"""The background worker `reef serve` runs evolution jobs on: one job at a time (the
embedded model is one model), each a call into ``recipes.engine.evolve``.

``Worker`` implements ``reef_cli.core.jobs.JobRunner``; ``cli/serve.py`` hands it to the
server, which never imports recipes.
"""

from __future__ import annotations

import queue
import threading

from recipes import engine, tasks
from reef_cli.core import jobs, scenarios


class Worker:
    def __init__(self) -> None:
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        for job in jobs.interrupted():
            job.state, job.message = (
                "failed",
                "the server stopped while this job ran; submit it again",
            )
            jobs.save(job)
        self._thread = threading.Thread(target=self._loop, name="reef-jobs", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=5)

    def submit(self, job: jobs.Job) -> None:
        self._queue.put(job.id)

    def _loop(self) -> None:
        while True:
            job_id = self._queue.get()
            if job_id is None:
                return
            run_job(jobs.get(job_id))


def run_job(job: jobs.Job) -> jobs.Job:
    job.state = "running"
    jobs.save(job)

    def progress(message: str, fraction: float | None = None) -> None:
        job.progress = {"message": message, "fraction": fraction}
        jobs.save(job)

    try:
        scenario = scenarios.get(job.scenario)
        outcome = engine.evolve(
            engine.EvolveRequest(
                scenario=scenario,
                recipe=job.recipe,
                ask=job.ask,
                adapter=job.adapter or "pi",
                tasks=tasks.for_scenario(scenario),
                recipe_options=job.options,
                publish="review" if job.publish == "review" else "auto",
                progress=progress,
            )
        )
        job.state, job.message, job.release = outcome.state, outcome.message, outcome.release
        job.outcome = outcome.to_json()
    except Exception as exc:  # a job must end with a state, whatever went wrong
        job.state, job.message = "failed", f"{type(exc).__name__}: {exc}"[:500]
    job.progress = {"message": job.state, "fraction": 1.0}
    return jobs.save(job)

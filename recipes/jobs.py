"""The background worker `reef serve` runs evolution jobs on: one job at a time (the
embedded model is one model), each a thread-safe call into ``recipes.engine``."""

from __future__ import annotations

import queue
import threading

from reef_cli.core import jobs
from reef_cli.core.budget import Budget


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
    from recipes import engine
    from reef_cli.core.llm import ModelClient

    job.state = "running"
    jobs.save(job)

    def progress(message: str, fraction: float | None = None) -> None:
        job.progress = {"message": message, "fraction": fraction}
        jobs.save(job)

    try:
        from recipes.tasks import TASKS_FILE, load
        from reef_cli.core import scenarios

        tasks_file = scenarios.get(job.scenario).path / TASKS_FILE
        tasks = load(tasks_file) if tasks_file.exists() else None
        model = ModelClient(None, budget=Budget(max_calls=20, max_tokens=200_000, max_seconds=1800))
        with engine.PiRunner(job.scenario, model) as runner:
            outcome = engine.run(
                job.scenario,
                engine.recipe_named(job.recipe),
                model=model,
                ask=job.ask,
                progress=progress,
                runner=runner,
                tasks=tasks,
            )
        job.state, job.message, job.release = outcome.state, outcome.message, outcome.release
        job.outcome = outcome.to_json()
    except Exception as exc:  # a job must end with a state, whatever went wrong
        job.state, job.message = "failed", f"{type(exc).__name__}: {exc}"[:500]
    job.progress = {"message": job.state, "fraction": 1.0}
    return jobs.save(job)

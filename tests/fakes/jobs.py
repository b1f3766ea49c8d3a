"""A JobRunner that keeps the jobs it is handed and runs none: for tests of what a server
or the live loop submits (the job file it writes is the real one)."""

from __future__ import annotations

from reef_cli.core import jobs


class KeptJobs:
    def __init__(self) -> None:
        self.jobs: list[jobs.Job] = []

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def submit(self, job: jobs.Job) -> None:
        self.jobs.append(job)

"""The job queue (core/jobs.py): the one place a job is submitted, run and failed."""

from __future__ import annotations

from typing import Any

import pytest

from reef_cli.core import jobs


class _Taking:
    def __init__(self) -> None:
        self.taken: list[str] = []

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def submit(self, job: jobs.Job) -> None:
        self.taken.append(job.id)


class _Refusing(_Taking):
    def submit(self, job: jobs.Job) -> None:
        raise RuntimeError("queue full")


def test_a_submitted_job_waits_queued_for_its_runner() -> None:
    runner, job = _Taking(), jobs.create("s", "gepa", None)
    assert jobs.submit(runner, job) is None
    assert runner.taken == [job.id]
    assert jobs.get(job.id).state == "queued"


def test_a_refused_job_ends_failed_and_says_why() -> None:
    job = jobs.create("s", "gepa", None)
    why = jobs.submit(_Refusing(), job)
    assert why == "the job runner refused the job (RuntimeError)"
    stored = jobs.get(job.id)
    assert (stored.state, stored.message) == ("failed", why)
    assert stored.progress == {"message": "failed", "fraction": 1.0}
    assert jobs.active() == []


def test_execute_saves_each_step_and_ends_with_the_outcome() -> None:
    job = jobs.create("s", "reefine", "ask")
    seen: list[tuple[str, Any]] = []

    def work(progress: jobs.Progress) -> dict[str, Any]:
        seen.append((jobs.get(job.id).state, None))
        progress("half way", 0.5)
        seen.append((jobs.get(job.id).progress["message"], jobs.get(job.id).progress["fraction"]))
        return {"state": "published", "message": "r2", "release": 2, "verdict": {}}

    ended = jobs.execute(job, work)
    assert seen == [("running", None), ("half way", 0.5)]
    stored = jobs.get(job.id)
    assert (stored.state, stored.message, stored.release) == ("published", "r2", 2)
    assert stored.outcome["verdict"] == {} and ended.progress["fraction"] == 1.0


def test_execute_ends_failed_on_any_exception() -> None:
    job = jobs.create("s", "reefine", "ask")

    def work(progress: jobs.Progress) -> dict[str, Any]:
        raise KeyError("boom")

    jobs.execute(job, work)
    stored = jobs.get(job.id)
    assert stored.state == "failed" and stored.message == "KeyError: 'boom'"


@pytest.mark.parametrize("state", ["published", "rejected"])
def test_fail_if_active_leaves_a_settled_job_as_it_is(state: str) -> None:
    job = jobs.create("s", "gepa", None)
    job.state = state
    jobs.save(job)
    jobs.fail_if_active(job.id, "the process died")
    assert jobs.get(job.id).state == state
    jobs.fail_if_active("job_0000", "no such job: nothing happens")


def test_fail_interrupted_fails_only_this_replicas_active_jobs() -> None:
    mine = jobs.create("s", "gepa", None)
    theirs = jobs.create("s", "gepa", None)
    theirs.owner = "other-host:/state"
    jobs.save(theirs)
    failed = jobs.fail_interrupted("the server stopped")
    assert [j.id for j in failed] == [mine.id]
    assert jobs.get(theirs.id).state == "queued"

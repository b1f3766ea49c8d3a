"""The job queue: evolution jobs run by `reef serve` in the background.

This module is the only place a job is created, handed to a runner (``submit``), moved
through its states (``execute``) or ended as failed (``fail``), so the API, the live loop
and the worker cannot disagree on what a job's life looks like. A job is kept by the
store and rewritten on every progress step, so its state survives the server and any
client can read it (SQLite: one JSON file each under ``jobs/`` in the state dir;
PostgreSQL: a table every replica reads, so ``GET /reef/jobs/{id}`` answers on any of
them). ``owner`` names the replica running a job: a restarting replica fails only the
jobs it left behind. What runs a job is a ``JobRunner`` (``recipes.engine.worker``),
wired in by the CLI, so the server imports no recipe."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol

from reef_cli.core import paths, store
from reef_cli.core.clock import now_iso
from reef_cli.core.errors import ReefError

log = logging.getLogger("reef.jobs")

ACTIVE = ("queued", "running")
FLOWS = ("evolve", "quickstart", "proposal")
PROPOSAL_RECIPE = "proposal"  # recipes/proposal.py: a change someone wrote, gated as is
QUICKSTART_RECIPE = "reefine"  # the quickstart flow evolves its ask with Reefine


class JobNotFound(ReefError):
    """No job with that id."""

    http_status = 404


@dataclass
class Job:
    id: str
    scenario: str
    recipe: str
    ask: str | None
    adapter: str | None = None
    options: dict[str, Any] = field(default_factory=dict)  # the recipe's (gepa: max_metric_calls …)
    # queued | running | published | pending | unchanged | rejected | invalid | stopped | failed
    state: str = "queued"
    progress: dict[str, Any] = field(default_factory=lambda: {"message": "queued", "fraction": 0.0})
    release: int | None = None
    message: str = ""
    outcome: dict[str, Any] = field(default_factory=dict)
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)
    # auto: a passing candidate goes live; review: it waits as a pending release (a
    # proposal). Job files written before this field load as "auto".
    publish: str = "auto"
    origin: str = "api"  # api (POST /reef/evolve) | live-loop | train (POST /reef/train)
    owner: str = ""  # the replica that runs it (replica_id()); "" in jobs from before
    # evolve: the recipe on the scenario; quickstart: recipes.engine.quickstart's flow
    # (the scenario and pi's install around a Reefine run); proposal: the change in
    # ``options["files"]`` gated as is (POST /reef/harness/proposals; ``ask``: its reason)
    flow: str = "evolve"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_FIELDS = {f.name for f in fields(Job)}


class JobRunner(Protocol):
    """What runs jobs for `reef serve`. The server only queues; the runner (wired in by
    ``cli/serve.py``: ``recipes.engine.worker.Worker``) does the work, so the server imports no
    recipe. ``start`` runs at server start-up, ``stop`` at shutdown."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def submit(self, job: Job) -> None: ...


def replica_id() -> str:
    """This replica: its host and state dir (stable across restarts of the same one)."""
    import socket

    return f"{socket.gethostname()}:{paths.state_dir()}"


def _check_id(job_id: str) -> None:
    if not job_id.startswith("job_") or not job_id[4:].isalnum():
        raise JobNotFound(f"no job {job_id!r}", "job ids look like job_1a2b…")


def save(job: Job) -> Job:
    job.updated_at = now_iso()
    _check_id(job.id)
    store.shared().save_job(job.to_json())
    return job


def create(
    scenario: str,
    recipe: str,
    ask: str | None,
    adapter: str | None = None,
    options: dict[str, Any] | None = None,
    *,
    publish: str = "auto",
    origin: str = "api",
    flow: str = "evolve",
) -> Job:
    if publish not in ("auto", "review"):
        raise ValueError(f"publish must be auto or review, not {publish!r}")
    if flow not in FLOWS:
        raise ValueError(f"flow must be one of {', '.join(FLOWS)}, not {flow!r}")
    job = Job(f"job_{uuid.uuid4().hex[:16]}", scenario, recipe, ask, adapter, options or {})
    job.publish, job.origin, job.owner, job.flow = publish, origin, replica_id(), flow
    return save(job)


def _known(data: dict[str, Any]) -> dict[str, Any]:
    """A job's fields this version knows (a newer Reef may have written more)."""
    return {k: v for k, v in data.items() if k in _FIELDS}


def missing(job_id: str) -> JobNotFound:
    """The answer for a job that does not exist, and (the server) for one the caller may
    not see: the same, so it tells nobody which ids exist."""
    return JobNotFound(f"no job {job_id!r}", "list releases with `reef harness versions`")


def get(job_id: str) -> Job:
    _check_id(job_id)
    data = store.shared().load_job(job_id)
    if data is None:
        raise missing(job_id)
    return Job(**_known(data))


def _active() -> list[Job]:
    out = []
    for data in store.shared().jobs(active_only=True):
        try:
            out.append(Job(**_known(data)))
        except TypeError:
            continue
    return out


def recent(limit: int = 100) -> list[Job]:
    """The newest ``limit`` jobs of every replica, newest first (the console's list)."""
    out = []
    for data in reversed(store.shared().jobs()):
        try:
            out.append(Job(**_known(data)))
        except TypeError:
            continue
        if len(out) >= limit:
            break
    return out


def active(scenario: str | None = None) -> list[Job]:
    """Queued or running jobs (of ``scenario``, when given), on any replica."""
    return [j for j in _active() if scenario is None or j.scenario == scenario]


def interrupted() -> list[Job]:
    """Jobs this replica left queued or running when it stopped (marked failed on its next
    start); another replica's running jobs are its own business. A job written before
    ``owner`` existed counts as this replica's."""
    me = replica_id()
    return [j for j in _active() if j.owner in ("", me)]


Progress = Callable[[str, "float | None"], None]


def fail(job: Job, message: str) -> Job:
    """End ``job`` as failed: a job must end with a state, whatever went wrong."""
    job.state, job.message = "failed", message
    job.progress = {"message": "failed", "fraction": 1.0}
    return save(job)


def fail_if_active(job_id: str, message: str) -> None:
    """Fail a job its runner left queued or running (a settled one is left as it is)."""
    try:
        job = get(job_id)
    except JobNotFound:
        return
    if job.state in ACTIVE:
        fail(job, message)


def fail_interrupted(message: str) -> list[Job]:
    """At a replica's start: fail the jobs it left active when it stopped."""
    return [fail(job, message) for job in interrupted()]


def submit(runner: JobRunner, job: Job) -> str | None:
    """Hand ``job`` to ``runner``; None when it took it, else why it did not (the job is
    then failed, so nothing waits on a job no runner has)."""
    try:
        runner.submit(job)
    except Exception as exc:  # the runner refused: the job ends here, the caller goes on
        why = f"the job runner refused the job ({type(exc).__name__})"
        fail(job, why)
        return why
    return None


def execute(job: Job, work: Callable[[Progress], dict[str, Any]]) -> Job:
    """Run ``work`` as ``job``: mark it running, save each progress step, and end it with
    the outcome ``work`` returns (``state``, ``message``, ``release`` and the rest), or
    failed on any exception. With traces on, the job is a span and each step a child."""
    job.state = "running"
    save(job)
    spans = _JobSpans.start(job)

    def progress(message: str, fraction: float | None = None) -> None:
        job.progress = {"message": message, "fraction": fraction}
        save(job)
        if spans is not None:
            spans.step(message, fraction)

    try:
        try:
            outcome = work(progress)
        except Exception as exc:  # a job must end with a state, whatever went wrong
            return fail(job, f"{type(exc).__name__}: {exc}"[:500])
        job.state, job.message = outcome["state"], outcome["message"]
        job.release, job.outcome = outcome.get("release"), outcome
        job.progress = {"message": job.state, "fraction": 1.0}
        return save(job)
    finally:
        if spans is not None:
            spans.end(job)


class _JobSpans:
    """A job's span and the span of the step it is on. A step is named by its progress
    line's first word or the part before a colon ("gate", "evaluation", "trial"): the
    rest of a line may quote the ask, which never goes into a trace."""

    def __init__(self, tracer: Any, job: Job) -> None:
        self.tracer = tracer
        self.job = tracer.start_span(
            "reef.job",
            attributes={
                "reef.job.id": job.id,
                "reef.scenario": job.scenario,
                "reef.recipe": job.recipe,
                "reef.job.flow": job.flow,
                "reef.job.origin": job.origin,
            },
        )
        self.current: Any = None

    @classmethod
    def start(cls, job: Job) -> _JobSpans | None:
        from reef_cli.core import tracing

        try:
            tracer = tracing.tracer()
        except ReefError as exc:  # asked for, not installed: the job runs untraced
            log.warning("%s", exc.one_line())
            return None
        return cls(tracer, job) if tracer is not None else None

    def step(self, message: str, fraction: float | None) -> None:
        from opentelemetry import trace

        if self.current is not None:
            self.current.end()
        name = message.split(":", 1)[0] if ":" in message else message.split(" ", 1)[0]
        attributes: dict[str, Any] = {"reef.step": name[:40]}
        if fraction is not None:
            attributes["reef.step.fraction"] = fraction
        self.current = self.tracer.start_span(
            "reef.job.step", context=trace.set_span_in_context(self.job), attributes=attributes
        )

    def end(self, job: Job) -> None:
        from opentelemetry.trace import Status, StatusCode

        from reef_cli.core import tracing

        if self.current is not None:
            self.current.end()
        self.job.set_attribute("reef.job.state", job.state)
        if job.release is not None:
            self.job.set_attribute("reef.release", job.release)
        if job.state == "failed":
            self.job.set_status(Status(StatusCode.ERROR, "failed"))
        self.job.end()
        tracing.flush()  # a job's child process may be stopped right after its job

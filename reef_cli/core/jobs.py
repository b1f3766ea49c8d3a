"""Evolution jobs run by `reef serve` in the background: one JSON file each under
``jobs/`` in the state dir, rewritten atomically on every progress step, so a job's state
survives the server and any client can read it."""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

from reef_cli.core import paths
from reef_cli.core.errors import ReefError
from reef_cli.core.fsutil import atomic_write_text
from reef_cli.core.releases import now_iso

ACTIVE = ("queued", "running")


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
    origin: str = "api"  # api (POST /reef/evolve) | live-loop

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_FIELDS = {f.name for f in fields(Job)}


class JobRunner(Protocol):
    """What runs jobs for `reef serve`. The server only queues; the runner (wired in by
    ``cli/serve.py``: ``recipes.jobs.Worker``) does the work, so the server imports no
    recipe. ``start`` runs at server start-up, ``stop`` at shutdown."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def submit(self, job: Job) -> None: ...


def _dir() -> Path:
    return paths.state_dir() / "jobs"


def _path(job_id: str) -> Path:
    if not job_id.startswith("job_") or not job_id[4:].isalnum():
        raise JobNotFound(f"no job {job_id!r}", "job ids look like job_1a2b…")
    return _dir() / f"{job_id}.json"


def save(job: Job) -> Job:
    job.updated_at = now_iso()
    paths.ensure_state_dir()
    atomic_write_text(_path(job.id), json.dumps(job.to_json(), indent=2, default=str) + "\n")
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
) -> Job:
    if publish not in ("auto", "review"):
        raise ValueError(f"publish must be auto or review, not {publish!r}")
    job = Job(f"job_{uuid.uuid4().hex[:16]}", scenario, recipe, ask, adapter, options or {})
    job.publish, job.origin = publish, origin
    return save(job)


def _known(data: dict[str, Any]) -> dict[str, Any]:
    """A job file's fields this version knows (a newer Reef may have written more)."""
    return {k: v for k, v in data.items() if k in _FIELDS}


def get(job_id: str) -> Job:
    path = _path(job_id)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise JobNotFound(
            f"no job {job_id!r}", "list releases with `reef harness versions`"
        ) from None
    return Job(**_known(data))


def active(scenario: str | None = None) -> list[Job]:
    """Queued or running jobs (of ``scenario``, when given)."""
    return [j for j in interrupted() if scenario is None or j.scenario == scenario]


def interrupted() -> list[Job]:
    """Jobs a stopped server left queued or running (marked failed on the next start)."""
    if not _dir().is_dir():
        return []
    out = []
    for path in sorted(_dir().glob("job_*.json")):
        try:
            job = Job(**_known(json.loads(path.read_text(encoding="utf-8"))))
        except (ValueError, TypeError, OSError):
            continue
        if job.state in ACTIVE:
            out.append(job)
    return out

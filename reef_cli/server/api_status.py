"""``GET /reef/status``: what this `reef serve` is and serves, in one read (version,
uptime, store, upstream, the served releases and the live loop), for a person or a
dashboard deciding whether it is healthy and current."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request

from reef_cli import __version__
from reef_cli.core import jobs, learning_state, scenarios
from reef_cli.core.store_url import scheme_of, shown_url
from reef_cli.core.tokens import Grant
from reef_cli.server.api import ERRORS, grant_of


def scenario_status(found: scenarios.Scenario, loop: Any) -> dict[str, Any]:
    """One scenario's served and latest release and its live loop's state."""
    chain = found.chain()
    served, latest = chain.served(), chain.latest()
    learning = learning_state.load(found.path)
    last = learning.last_run if learning is not None else None
    return {
        "name": found.name,
        "served": served.number if served else None,
        "latest": latest.number if latest else None,
        "learning": {
            "enabled": loop is not None and loop.covers(found.name),
            "checked_at": learning.checked_at if learning else None,
            "next_trigger": (learning.next_trigger or None) if learning else None,
            "last_run": last.summary() if last is not None else None,
        },
    }


def status(state: Any, grant: Grant) -> dict[str, Any]:
    """The status a grant may see: a scenario token sees its scenarios and no settings
    (the store and upstream are the whole server's)."""
    config = state.config
    loop = state.learning
    recorder = state.recorder
    whole = grant.scenarios is None
    out: dict[str, Any] = {
        "version": __version__,
        "started_at": state.started_at,
        "uptime_s": round(time.monotonic() - state.started, 1),
        "default_scenario": config.default_scenario,
        "recording": recorder is not None,
        "records_pending": recorder.pending if recorder is not None else 0,
        "live_loop": {
            "enabled": loop is not None,
            "recipe": loop.config.recipe if loop is not None else None,
        },
        "scenarios": [
            scenario_status(s, loop) for s in scenarios.list_all() if grant.allows(s.name)
        ],
    }
    if whole:
        url = state.store.url
        out["replica"] = jobs.replica_id()
        out["store"] = {"backend": scheme_of(url) or "sqlite", "url": shown_url(url)}
        out["upstream"] = {"url": shown_url(config.upstream or ""), "dialect": config.dialect}
        out["config"] = config.shown()
        if recorder is not None:
            process = recorder.process
            out["record_writer"] = {
                "kind": "thread" if process is None else "process",
                "pid": None if process is None else process.pid,
                "restarts": 0 if process is None else process.restarts,
            }
    return out


def make_router() -> APIRouter:
    router = APIRouter()

    @router.get("/reef/status", tags=["health"], responses=ERRORS)
    def get_status(request: Request, grant: Grant = Depends(grant_of)) -> dict[str, Any]:
        """Version, uptime, the served release and live loop of each scenario the token
        may see; with a token for every scenario also the replica, store, upstream and
        the effective settings (passwords masked)."""
        return status(request.app.state, grant)

    return router


def install(app: FastAPI) -> None:
    app.include_router(make_router())

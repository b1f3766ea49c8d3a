"""The live loop over HTTP: ``GET /reef/scenarios/{s}/learning`` (its state) and
``POST /reef/train`` (a run now)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field

from reef_cli.core import jobs, learning_state, scenarios
from reef_cli.core.errors import ServeError
from reef_cli.core.names import check_name
from reef_cli.core.tokens import Grant
from reef_cli.server.api import ERRORS, allow, grant_of, path_scenario
from reef_cli.server.learning import TrainRefused

TRAIN_WAIT_S = 60.0  # the loop answers within one check; a huge recount may take long


class TrainIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scenario: str | None = Field(
        None, max_length=64, description="default: x-reef-scenario, else the server's"
    )


def make_router() -> APIRouter:
    router = APIRouter()

    @router.get("/reef/scenarios/{scenario}/learning", tags=["scenarios"], responses=ERRORS)
    def learning(request: Request, scenario: str = Depends(path_scenario)) -> dict[str, Any]:
        """The live loop for one scenario: eligible, stale and unscored sessions at the
        last check, the last run and its outcome, what the next run waits for, and the
        loop's settings. Read from ``learning.json``: nothing is counted on this request."""
        found = scenarios.get(scenario)
        loop = request.app.state.learning
        enabled = loop is not None and loop.covers(scenario)
        config = loop.config.model_dump() if loop is not None else None
        state = learning_state.load(found.path)
        return learning_state.view(scenario, state, enabled=enabled, config=config)

    @router.post("/reef/train", tags=["scenarios"], responses=ERRORS, status_code=202)
    async def train(
        request: Request, body: TrainIn | None = None, grant: Grant = Depends(grant_of)
    ) -> dict[str, Any]:
        """Run the live loop's recipe on a scenario now, on the eligible scored sessions
        it has (any number from one), for a scenario whose training_mode is manual or
        hybrid. 202 with the queued job."""
        state = request.app.state
        name = (
            (body.scenario if body else None)
            or request.headers.get("x-reef-scenario")
            or state.config.default_scenario
        )
        check_name("scenario", name)
        allow(grant, name)
        found = await asyncio.to_thread(scenarios.get, name)
        loop = state.learning
        if loop is None:
            raise TrainRefused(
                "this reef serve runs no live loop",
                "start it with --recipe skillclaw (or a serve.yaml `reef:` section), or "
                "POST /reef/evolve with a recipe",
            )
        if not loop.covers(name):
            raise TrainRefused(
                f"the live loop does not learn for {name}",
                "add it to the `scenarios` list of serve.yaml's `reef:` section",
            )
        if found.training_mode == "auto":
            raise TrainRefused(
                f"{name}'s training_mode is auto: the live loop starts its runs",
                f"`reef scenario set {name} --training-mode hybrid` (or manual) to start "
                "runs on demand",
            )
        try:
            job_id = await asyncio.wait_for(asyncio.wrap_future(loop.train(name)), TRAIN_WAIT_S)
        except TimeoutError:
            raise ServeError(
                f"the live loop did not answer within {TRAIN_WAIT_S:g}s", "try again"
            ) from None
        return (await asyncio.to_thread(jobs.get, job_id)).to_json()

    return router


def install(app: FastAPI) -> None:
    app.include_router(make_router())

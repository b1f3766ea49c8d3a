"""The live loop's state over HTTP: ``GET /reef/scenarios/{s}/learning``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request

from reef_cli.core import learning_state, scenarios
from reef_cli.server.api import ERRORS, path_scenario


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

    return router


def install(app: FastAPI) -> None:
    app.include_router(make_router())

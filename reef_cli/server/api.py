"""The Reef API: reports, scenarios, releases, rollback/promote, harness files and release
pages, health."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from reef_cli.core import scenarios
from reef_cli.core.controls import MAX_REASON, check_text
from reef_cli.core.errors import AuthError, InvalidText, ReleaseNotFound
from reef_cli.core.names import check_name
from reef_cli.core.publishing import republish
from reef_cli.core.publishing import rollback as rollback_release
from reef_cli.core.releases import Release
from reef_cli.core.reports import (
    ReportIn,
    ReportInvalid,
    parse_report,
    refuse_unknown,
    save_report,
)
from reef_cli.core.store import Store
from reef_cli.core.tokens import Grant
from reef_cli.server import replicas

bearer = HTTPBearer(auto_error=False, description="the Reef token (`reef token`)")


class Forbidden(AuthError):
    """A valid token that may not touch this scenario (HTTP 403)."""

    http_status = 403


class Unauthorized(AuthError):
    """No token or a wrong one (HTTP 401)."""

    http_status = 401


class ErrorBody(BaseModel):
    error: dict[str, Any]


def _no_controls(value: str) -> str:
    """Refuse a control character (an escape sequence, a bidi override) in text a person
    later reads on a terminal; a 400 naming the field."""
    try:
        return check_text("it", value, limit=None)
    except InvalidText as exc:
        raise ValueError(exc.message.removeprefix("it ")) from None


#: A reason or description: at most MAX_REASON characters, line breaks and tabs but no
#: other control character.
Text = Annotated[str, Field(max_length=MAX_REASON), AfterValidator(_no_controls)]


class ScenarioIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=64, description="kebab-case name")
    description: Text = ""


class ScenarioPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: Text | None = None
    training_mode: Literal["auto", "manual", "hybrid"] | None = Field(
        None,
        description="auto: the live loop starts runs; manual: only POST /reef/train; hybrid: both",
    )


class ScenarioOut(BaseModel):
    name: str
    description: str
    created_at: str
    training_mode: str = "auto"
    served: int | None = None
    latest: int | None = None


class RollbackIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    to: int | None = Field(
        None,
        ge=1,
        le=10**9,
        description="release to restore (default: the release served before the current "
        "one — the newest live release older than the served one, with other content)",
    )
    reason: Text = ""


class PromoteIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    release: int | None = Field(
        None, ge=1, le=10**9, description="release to make live (default: latest)"
    )
    reason: Text = ""


class ReportOut(BaseModel):
    id: str
    scenario: str
    score: float | None
    feedback: Any = None
    references: list[str]
    metadata: dict[str, Any] | None = None
    created_at: str
    created: bool


class HarnessOut(BaseModel):
    scenario: str
    release: dict[str, Any]
    files: dict[str, str]


ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody},
    401: {"model": ErrorBody},
    403: {"model": ErrorBody},
    404: {"model": ErrorBody},
    409: {"model": ErrorBody},
}


def grant_of(
    request: Request, creds: HTTPAuthorizationCredentials | None = Depends(bearer)
) -> Grant:
    """The caller's grant from its bearer token (any scenario when the server is open)."""
    auth = request.app.state.auth
    if auth.open:
        return auth.grant({})
    got = auth.grant(request.headers, allow_api_key=False)
    if got is None:
        raise Unauthorized(
            "missing or wrong Reef token",
            "send `Authorization: Bearer <token>`; `reef token` prints it",
        )
    return got


def allow(grant: Grant, scenario: str) -> None:
    """Raise ``Forbidden`` unless ``grant`` may touch ``scenario``. Call it before any write."""
    if not grant.allows(scenario):
        raise Forbidden(
            f"this token is not allowed for scenario {scenario!r}",
            "use a token made for this scenario (`reef token create --scenario`)",
        )


def path_scenario(scenario: str, grant: Grant = Depends(grant_of)) -> str:
    """The ``{scenario}`` of a route's path, well named and allowed for the caller. As a
    dependency it is checked before the route function runs, so before any write."""
    check_name("scenario", scenario)
    allow(grant, scenario)
    return scenario


async def _report_scenario(request: Request, report: ReportIn, grant: Grant) -> str:
    """The scenario a report is stored in, authorised before anything is written.

    It is ``x-reef-scenario``, else the references' scenario, else the server's default.
    Every scenario the report touches (its own and each referenced receipt's) must be
    allowed for the caller's token; the chosen scenario is passed to ``save_report``
    explicitly, so a receipt recorded between this check and the insert cannot move the
    report into a scenario that was not authorised.
    """
    header = request.headers.get("x-reef-scenario")
    if header is not None:
        check_name("scenario", header)
    store: Store = request.app.state.store
    recorder = request.app.state.recorder
    known: dict[str, str] = {}
    refs = report.references

    def visible() -> dict[str, str]:
        """The receipts that exist *for this caller*: one of a scenario it may not see is
        treated as unknown all the way (the same waits, status and body), so receipts
        of other scenarios cannot be probed."""
        return {ref: name for ref, name in store.exists(refs).items() if grant.allows(name)}

    if refs:
        known = await asyncio.to_thread(visible)
        if len(known) < len(refs) and recorder is not None:
            await asyncio.to_thread(recorder.flush, 10.0)
            known = await asyncio.to_thread(visible)
        known = await replicas.read_until(
            store, visible, lambda found: len(found) == len(refs), known
        )
        refuse_unknown(refs, known)
    referenced = sorted(set(known.values()))
    for name in ([header] if header is not None else []) + referenced:
        allow(grant, name)
    if header is not None:
        return header
    if len(referenced) > 1:
        raise ReportInvalid("references", "receipts come from more than one scenario")
    if referenced:
        return referenced[0]
    default: str = request.app.state.config.default_scenario
    allow(grant, default)
    return default


def make_router() -> APIRouter:
    router = APIRouter()

    @router.get("/healthz", tags=["health"])
    def healthz(request: Request) -> dict[str, Any]:
        """Liveness: no token needed; says nothing secret."""
        state = request.app.state
        recorder = state.recorder
        return {
            "status": "ok",
            "upstream_dialect": state.upstream.dialect,
            "recording": recorder is not None,
            "records_pending": recorder.pending if recorder else 0,
        }

    @router.post(
        "/reef/report",
        tags=["reports"],
        responses=ERRORS,
        response_model=ReportOut,
        status_code=201,
    )
    async def report(
        request: Request, response: Response, body: ReportIn, grant: Grant = Depends(grant_of)
    ) -> ReportOut:
        """Score or comment on recorded exchanges by their receipts. Idempotent by `id`."""
        parsed = parse_report(body.model_dump())
        store: Store = request.app.state.store
        target = await _report_scenario(request, parsed, grant)
        stored = await asyncio.to_thread(save_report, store, parsed, target)
        if not stored.created:
            response.status_code = 200
        return ReportOut(**stored.to_json(), created=stored.created)

    @router.get("/reef/scenarios", tags=["scenarios"], responses=ERRORS)
    def list_scenarios(grant: Grant = Depends(grant_of)) -> list[ScenarioOut]:
        return [_scenario_out(s) for s in scenarios.list_all() if grant.allows(s.name)]

    @router.post("/reef/scenarios", tags=["scenarios"], responses=ERRORS, status_code=201)
    def create_scenario(body: ScenarioIn, grant: Grant = Depends(grant_of)) -> ScenarioOut:
        check_name("scenario", body.name)
        allow(grant, body.name)
        return _scenario_out(scenarios.create(body.name, body.description))

    @router.patch("/reef/scenarios/{scenario}", tags=["scenarios"], responses=ERRORS)
    def update_scenario(body: ScenarioPatch, scenario: str = Depends(path_scenario)) -> ScenarioOut:
        """Change a scenario's description or training mode."""
        return _scenario_out(
            scenarios.update(
                scenario, description=body.description, training_mode=body.training_mode
            )
        )

    @router.delete("/reef/scenarios/{scenario}", tags=["scenarios"], responses=ERRORS)
    def delete_scenario(
        request: Request,
        force: bool = Query(False, description="archive it even while an agent is installed"),
        scenario: str = Depends(path_scenario),
    ) -> dict[str, Any]:
        """Archive a scenario: its folder and chain move to the state dir's archive
        (`reef scenario restore` brings it back); records stay in the store. 409 while one
        of its jobs is queued or running, or an agent is installed from it (unless
        ``force``)."""
        target = scenarios.delete(scenario, force=force)
        request.app.state.releases.invalidate(scenario)
        return {"scenario": scenario, "archived": target.name}

    @router.get("/reef/scenarios/{scenario}/releases", tags=["releases"], responses=ERRORS)
    def releases(scenario: str = Depends(path_scenario)) -> list[dict[str, Any]]:
        from reef_cli.core import proposals

        found = scenarios.get(scenario)
        releases = found.chain().releases()
        states = proposals.states(found, releases)
        return [proposals.release_json(r, states) for r in releases]

    @router.post(
        "/reef/scenarios/{scenario}/rollback", tags=["releases"], responses=ERRORS, status_code=201
    )
    def rollback(
        request: Request,
        body: RollbackIn | None = None,
        scenario: str = Depends(path_scenario),
    ) -> dict[str, Any]:
        """Publish a new release with the content of an earlier one (numbers only grow);
        without ``to``, the release served before the current one (``Chain.rollback_target``,
        the same rule as `reef harness rollback` without RELEASE)."""
        body = body or RollbackIn(to=None, reason="")
        spec = None if body.to is None else str(body.to)
        release, _ = rollback_release(scenario, spec, reason=body.reason)
        request.app.state.releases.invalidate(scenario)
        return release.to_json()

    @router.post(
        "/reef/scenarios/{scenario}/promote", tags=["releases"], responses=ERRORS, status_code=201
    )
    def promote(
        request: Request,
        body: PromoteIn | None = None,
        scenario: str = Depends(path_scenario),
    ) -> dict[str, Any]:
        """Make a (pending) release live by publishing its content as a new live release."""
        body = body or PromoteIn(release=None, reason="")
        return promote_release(request.app.state, scenario, body.release, body.reason).to_json()

    @router.get("/reef/harness", tags=["releases"], responses=ERRORS)
    def harness(
        scenario: str = Query(..., max_length=64),
        release: str = Query(
            "served", max_length=32, description="3, r3, latest, served, previous"
        ),
        grant: Grant = Depends(grant_of),
    ) -> HarnessOut:
        """A release's harness tree (files) and metadata."""
        check_name("scenario", scenario)
        allow(grant, scenario)
        chain = scenarios.get(scenario).chain()
        found = chain.resolve(release)
        return HarnessOut(scenario=scenario, release=found.to_json(), files=chain.files(found))

    @router.get(
        "/reef/harness/releases/{n}/page",
        tags=["releases"],
        responses={**ERRORS, 200: {"content": {"text/html": {}}}},
        response_class=HTMLResponse,
    )
    def release_page(
        request: Request,
        n: int = PathParam(..., ge=1, le=10**9, description="release number"),
        scenario: str | None = Query(
            None, max_length=64, description="scenario (default: the server's)"
        ),
        grant: Grant = Depends(grant_of),
    ) -> HTMLResponse:
        """One release as a self-contained HTML page: why, changes, verdict, evaluation
        (with its plot), feedback (the accept curve), trial and chain. No script, no
        external resource."""
        from reef_cli.core.release_page import CSP, render_page

        name = scenario or request.app.state.config.default_scenario
        check_name("scenario", name)
        allow(grant, name)
        html = render_page(scenarios.get(name), n, store=request.app.state.store)
        return HTMLResponse(html, headers={"content-security-policy": CSP})

    return router


def promote_release(state: Any, scenario: str, number: int | None, reason: str = "") -> Release:
    """Make release ``number`` (None: the latest) of ``scenario`` live by publishing its
    content as a new release, and serve it from the next request. The API's promote and
    the console's share it; the caller has authorised the scenario."""
    chain = scenarios.get(scenario).chain()
    if number is None:
        latest = chain.latest()
        if latest is None:
            raise ReleaseNotFound("this scenario has no releases yet", "publish one first")
        number = latest.number
    else:
        number = chain.get(number).number
    release, _ = republish(
        scenario, str(number), source="promote", reason=reason or f"promote r{number}"
    )
    state.releases.invalidate(scenario)
    return release


def _scenario_out(s: scenarios.Scenario) -> ScenarioOut:
    chain = s.chain()
    served = chain.served()
    latest = chain.latest()
    return ScenarioOut(
        name=s.name,
        description=s.description,
        created_at=s.created_at,
        training_mode=s.training_mode,
        served=served.number if served else None,
        latest=latest.number if latest else None,
    )


def install(app: FastAPI) -> None:
    app.include_router(make_router())

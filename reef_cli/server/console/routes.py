"""The console over HTTP: ``/reef/ui`` pages, sign-in, and the two writes a person makes
here (promote and reject a proposal).

Who is calling: a bearer token when the request carries one (a script; no CSRF token
needed, a browser never sends that header by itself), else the session cookie. A write
through a session must carry the session's CSRF token and, when the browser sends an
``Origin``, come from this server's own origin. Pages answer HTML, errors included."""

from __future__ import annotations

from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from reef_cli.core import jobs, proposals, scenarios
from reef_cli.core.controls import MAX_REASON
from reef_cli.core.errors import AuthError, ReefError
from reef_cli.core.names import check_name
from reef_cli.core.records import RecordNotFound
from reef_cli.core.tokens import Grant
from reef_cli.server.api import Unauthorized, allow, promote_release
from reef_cli.server.console import pages
from reef_cli.server.console.html import (
    BASE,
    HEADERS,
    RELEASE_CSP,
    e,
    frame,
    nav_bar,
    url,
)
from reef_cli.server.console.sessions import COOKIE, COOKIE_PATH, Session, Sessions, csrf_ok

MAX_FORM = 16 * 1024  # a console form is a few fields
STATIC = {"console.css": "text/css", "console.js": "text/javascript"}
HTML: dict[int | str, dict[str, Any]] = {200: {"content": {"text/html": {}}}}


class ConsoleRefused(AuthError):
    """A console write without this session's CSRF token, or from another origin (403)."""

    http_status = 403


class _SignIn(Exception):
    """No session: the page sends the browser to sign in."""


class Caller:
    def __init__(self, grant: Grant, session: Session | None) -> None:
        self.grant, self.session = grant, session

    @property
    def csrf(self) -> str:
        return self.session.csrf if self.session is not None else ""

    @property
    def who(self) -> str:
        return "open server (loopback)" if self.grant.name == "open" else f"token {self.grant.name}"


def _sessions(request: Request) -> Sessions:
    sessions: Sessions = request.app.state.console_sessions
    return sessions


def _caller(request: Request) -> tuple[Caller, Session | None]:
    """The caller, and a session made just now (an open server's first page) whose cookie
    the answer must set. Raises ``_SignIn`` when nobody is signed in."""
    auth = request.app.state.auth
    if "authorization" in request.headers:
        grant = auth.grant(request.headers, allow_api_key=False)
        if grant is None:
            raise Unauthorized("wrong Reef token", "`reef token` prints it")
        return Caller(grant, None), None
    sessions = _sessions(request)
    found = sessions.find(request.cookies.get(COOKIE))
    if found is not None:
        return Caller(found[1], found[0]), None
    if auth.open:
        made = sessions.sign_in(None)
        assert made is not None  # an open server takes everyone from loopback
        return Caller(auth.grant({}), made), made
    raise _SignIn()


def _set_cookie(request: Request, response: Response, session: Session) -> None:
    response.set_cookie(
        COOKIE,
        session.id,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def _html(body: str, status: int = 200, headers: dict[str, str] | None = None) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers={**HEADERS, **(headers or {})})


def _problem(caller: Caller | None, exc: ReefError) -> HTMLResponse:
    hint = f"<p>{e(exc.hint)}</p>" if exc.hint else ""
    body = f'<p class="problem" role="alert">{e(exc.message)}</p>{hint}'
    page = frame(
        "Not possible",
        body,
        current="",
        csrf=caller.csrf if caller else None,
        who=caller.who if caller else "",
    )
    return _html(page, exc.http_status)


def _allow(caller: Caller, scenario: str) -> None:
    check_name("scenario", scenario)
    allow(caller.grant, scenario)


async def _page(request: Request, build: Any) -> Response:
    """Run ``build(caller) -> pages.Page | Response`` as a console page: sign-in, errors
    as HTML pages, the session cookie when one was made."""
    try:
        caller, made = _caller(request)
    except _SignIn:
        target = urlsplit(str(request.url))
        back = target.path + (f"?{target.query}" if target.query else "")
        return RedirectResponse(url("login", next=back), status_code=303)
    except ReefError as exc:
        return _problem(None, exc)
    try:
        built = build(caller)
    except ReefError as exc:
        response: Response = _problem(caller, exc)
    else:
        if isinstance(built, pages.Page):
            notice = request.query_params.get("done", "")[:200]
            response = _html(
                frame(
                    built.title,
                    built.body,
                    current=built.current,
                    csrf=caller.csrf or None,
                    who=caller.who,
                    notice=notice,
                )
            )
        else:
            response = built
    if made is not None:
        _set_cookie(request, response, made)
    return response


async def _form(request: Request) -> dict[str, str]:
    """A url-encoded form's fields (the first value of each), bounded in size."""
    raw = await request.body()
    if len(raw) > MAX_FORM:
        raise ConsoleRefused("the form is too large", "send the console's own form")
    fields = parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[0] for k, v in fields.items() if v}


def _same_origin(request: Request) -> bool:
    """A browser's ``Origin`` (sent with every cross-site POST) names this server; a
    request without one (not a browser form) passes to the CSRF token's check."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    host = request.headers.get("host", "")
    return origin in (f"http://{host}", f"https://{host}")


async def _write(request: Request, act: Any) -> Response:
    """Run ``act(caller, form) -> str`` (where to go next) as a console write: the caller
    authorised, the CSRF token and origin checked, all before anything is written."""
    try:
        caller, _ = _caller(request)
    except _SignIn:
        return _problem(None, Unauthorized("sign in first", f"open {BASE}/login"))
    except ReefError as exc:
        return _problem(None, exc)
    try:
        form = await _form(request)
        if caller.session is not None and not (
            _same_origin(request) and csrf_ok(caller.session, form.get("csrf"))
        ):
            raise ConsoleRefused(
                "this form did not carry the console's CSRF token",
                "reload the page and submit its form again",
            )
        target = act(caller, form)
    except ReefError as exc:
        return _problem(caller, exc)
    return RedirectResponse(target, status_code=303)


def _release_number(form: dict[str, str]) -> int:
    value = form.get("release", "")
    if not value.isdigit() or not 1 <= int(value) <= 10**9:
        raise pages.QueryInvalid("release: a release number", "choose a proposal from the inbox")
    return int(value)


def _score(value: str | None, field: str) -> float | None:
    if value is None or value == "":
        return None
    try:
        score = float(value)
    except ValueError:
        raise pages.QueryInvalid(f"{field}: a number from 0 to 1", "or leave it empty") from None
    if not 0.0 <= score <= 1.0:
        raise pages.QueryInvalid(f"{field}: a number from 0 to 1", "or leave it empty")
    return score


def _login_page(next_url: str, problem: str = "", status: int = 200) -> HTMLResponse:
    alert = f'<p class="problem" role="alert">{e(problem)}</p>' if problem else ""
    body = (
        f'{alert}<section id="login"><h2>Sign in with a Reef token</h2>'
        "<p>`reef token` prints the server's token; a scenario token "
        "(`reef token create --scenario`) shows only its scenarios.</p>"
        f'<form method="post" action="{e(url("login"))}">'
        f'<input type="hidden" name="next" value="{e(next_url)}">'
        '<label>token <input type="password" name="token" autocomplete="current-password" '
        'required autofocus></label> <button type="submit">Sign in</button></form></section>'
    )
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>Sign in · Reef console</title>"
        f'<link rel="stylesheet" href="{BASE}/static/console.css"></head><body>'
        f"{nav_bar('', None, '')}"
        f'<main id="main" tabindex="-1"><h1>Reef console</h1>{body}</main></body></html>\n'
    )
    return _html(page, status)


def _safe_next(value: str | None) -> str:
    """Only a console path: a sign-in never sends the browser elsewhere."""
    if value and value.startswith(BASE) and not value.startswith("//") and "\\" not in value:
        return value
    return BASE


def make_router() -> APIRouter:
    router = APIRouter(tags=["console"])
    kw: dict[str, Any] = {"response_class": HTMLResponse, "responses": HTML}

    @router.get(BASE, **kw)
    async def home(request: Request) -> Response:
        """The console: the scenarios this session's token may see."""
        return await _page(request, lambda c: pages.overview(request.app.state, c.grant))

    @router.get(BASE + "/scenarios/{scenario}", **kw)
    async def scenario_page(request: Request, scenario: str) -> Response:
        """A scenario: served release, feedback over time, proposals, chain, jobs."""

        def build(caller: Caller) -> pages.Page:
            _allow(caller, scenario)
            return pages.scenario(request.app.state, scenario, caller.csrf)

        return await _page(request, build)

    @router.get(BASE + "/scenarios/{scenario}/releases/{n}", **kw)
    async def release_page(request: Request, scenario: str, n: int) -> Response:
        """A release's page (core.release_page: why, diff, verdict, curve …) in the console."""
        from reef_cli.core.release_page import render_page

        def build(caller: Caller) -> Response:
            _allow(caller, scenario)
            top = (
                f'<p style="margin:12px 24px"><a href="{e(url())}">Console</a> › '
                f'<a href="{e(url("scenarios", scenario))}">{e(scenario)}</a></p>'
            )
            html = render_page(scenarios.get(scenario), n, store=request.app.state.store, top=top)
            return _html(html, headers={"content-security-policy": RELEASE_CSP})

        return await _page(request, build)

    @router.get(BASE + "/inbox", **kw)
    async def inbox(request: Request) -> Response:
        """Proposals waiting for a person, with promote and reject."""
        return await _page(request, lambda c: pages.inbox(c.grant, c.csrf))

    @router.get(BASE + "/jobs", **kw)
    async def job_list(request: Request) -> Response:
        """The newest jobs of the scenarios this token may see."""
        return await _page(request, lambda c: pages.job_list(c.grant))

    def _job(caller: Caller, job_id: str) -> jobs.Job:
        found = jobs.get(job_id[:64])
        if not caller.grant.allows(found.scenario):
            raise jobs.missing(found.id)  # as for an unknown id: no existence oracle
        return found

    @router.get(BASE + "/jobs/{job_id}", **kw)
    async def job_page(request: Request, job_id: str) -> Response:
        """A job: progress (followed live), details and outcome."""
        return await _page(request, lambda c: pages.job(_job(c, job_id)))

    @router.get(BASE + "/jobs/{job_id}/progress")
    async def job_progress(request: Request, job_id: str) -> Response:
        """A job's state and progress as JSON, for the job page's script."""
        from fastapi.responses import JSONResponse

        def build(caller: Caller) -> Response:
            found = _job(caller, job_id)
            body = {"state": found.state, "progress": found.progress, "release": found.release}
            return JSONResponse(body, headers={"cache-control": "no-store"})

        return await _page(request, build)

    @router.get(BASE + "/records", **kw)
    async def records(request: Request) -> Response:
        """Records by receipt, session, tag and reported score."""
        q = request.query_params

        def build(caller: Caller) -> pages.Page:
            query = pages.RecordQuery(
                scenario=q.get("scenario", "")[:64],
                receipt=q.get("receipt", "").strip()[:64],
                session=q.get("session", "").strip()[:256],
                tag=q.get("tag", "").strip()[:256],
                min_score=_score(q.get("min_score"), "score at least"),
                max_score=_score(q.get("max_score"), "score at most"),
            )
            if query.scenario:
                check_name("scenario", query.scenario)
            return pages.records(request.app.state, caller.grant, query)

        return await _page(request, build)

    @router.get(BASE + "/records/{record_id}", **kw)
    async def record_page(request: Request, record_id: str) -> Response:
        """One record: its facts, request and response."""

        def build(caller: Caller) -> pages.Page:
            page, scenario = pages.record(request.app.state.store, record_id[:64])
            if not caller.grant.allows(scenario):
                raise RecordNotFound(f"no record {record_id[:64]!r}", "search the records")
            return page

        return await _page(request, build)

    @router.post(BASE + "/scenarios/{scenario}/promote", **kw)
    async def promote(request: Request, scenario: str) -> Response:
        """Form: release, csrf. Publish the proposal's content as the live release."""

        def act(caller: Caller, form: dict[str, str]) -> str:
            _allow(caller, scenario)
            number = _release_number(form)
            reason = f"promoted from the console by {caller.grant.name}"
            made = promote_release(request.app.state, scenario, number, reason)
            return url("scenarios", scenario, done=f"r{number} promoted: {made.tag} is live")

        return await _write(request, act)

    @router.post(BASE + "/scenarios/{scenario}/reject", **kw)
    async def reject(request: Request, scenario: str) -> Response:
        """Form: release, reason?, csrf. Mark the proposal rejected (the chain is kept)."""

        def act(caller: Caller, form: dict[str, str]) -> str:
            _allow(caller, scenario)
            number = _release_number(form)
            reason = form.get("reason", "")[:MAX_REASON] or "rejected from the console"
            proposals.reject(scenarios.get(scenario), str(number), reason)
            return url("scenarios", scenario, done=f"r{number} rejected")

        return await _write(request, act)

    @router.get(BASE + "/login", **kw)
    async def login_form(request: Request) -> Response:
        """The sign-in form (a token; nothing is stored in the browser but a session id)."""
        if request.app.state.auth.open:
            return RedirectResponse(BASE, status_code=303)
        return _login_page(_safe_next(request.query_params.get("next")))

    @router.post(BASE + "/login", **kw)
    async def login(request: Request) -> Response:
        """Form: token, next. A right token starts a session (an HttpOnly, SameSite=Strict
        cookie); a wrong one is refused with nothing stored."""
        if not _same_origin(request):
            return _problem(None, ConsoleRefused("a sign-in from another site", "open the console"))
        try:
            form = await _form(request)
        except ReefError as exc:
            return _problem(None, exc)
        next_url = _safe_next(form.get("next"))
        session = _sessions(request).sign_in(form.get("token", "").strip()[:512] or None)
        if session is None:
            return _login_page(next_url, "That is not a Reef token of this server.", 401)
        response = RedirectResponse(next_url, status_code=303)
        _set_cookie(request, response, session)
        return response

    @router.post(BASE + "/logout", **kw)
    async def logout(request: Request) -> Response:
        """Form: csrf. End this session."""

        def act(caller: Caller, form: dict[str, str]) -> str:
            if caller.session is None:
                raise ConsoleRefused(
                    "a bearer token has no console session to end", "sign out in the browser"
                )
            _sessions(request).sign_out(caller.session.id)
            return url("login")

        response = await _write(request, act)
        response.delete_cookie(COOKIE, path=COOKIE_PATH)
        return response

    @router.get(BASE + "/static/{name}")
    async def static(name: str) -> Response:
        """The console's stylesheet and script (no other file is served)."""
        kind = STATIC.get(name)
        if kind is None:
            return Response("not found\n", status_code=404, media_type="text/plain")
        text = resources.files("reef_cli.server.console").joinpath("static", name).read_text()
        return Response(text, media_type=kind, headers={"cache-control": "max-age=300"})

    return router


def install(app: FastAPI) -> None:
    app.state.console_sessions = Sessions(app.state.auth)
    app.include_router(make_router())

"""The application factory: ``create_app(config)`` wires proxy, recorder, auth and the API."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from reef_cli.core import errors
from reef_cli.core.clock import now_iso
from reef_cli.core.jobs import JobRunner
from reef_cli.core.store import Store, open_store
from reef_cli.core.tokens import TokenSet
from reef_cli.core.weight_version import WeightVersion
from reef_cli.server import (
    api,
    api_jobs,
    api_learning,
    api_status,
    console,
    inference_schema,
    metrics,
)
from reef_cli.server.auth import Authenticator
from reef_cli.server.learning import LiveLoop
from reef_cli.server.memory import Trimmer
from reef_cli.server.metrics import Metrics, api_labels
from reef_cli.server.proxy import Proxy
from reef_cli.server.recorder import ROUTES, Recorder
from reef_cli.server.release_cache import ReleaseCache
from reef_cli.server.remote_sync import RemoteSync
from reef_cli.server.request_headers import ProxyRequest
from reef_cli.server.retention_task import RetentionTask
from reef_cli.server.serve_config import ServeConfig
from reef_cli.server.upstream import Upstream

log = logging.getLogger("reef.serve")


def _error(status: int, message: str, hint: str | None = None, **extra: Any) -> JSONResponse:
    body: dict[str, Any] = {"message": message, **extra}
    if hint:
        body["hint"] = hint
    return JSONResponse({"error": body}, status_code=status)


class ReefApp:
    """The ASGI entry: inference routes go straight to the proxy (the hot path skips the
    framework's middleware and routing; the proxy counts its own requests); everything
    else goes to the FastAPI app, counted here when metrics are on."""

    def __init__(
        self, api_app: FastAPI, fast: dict[tuple[str, str], Any], counts: Metrics | None = None
    ) -> None:
        self.api = api_app
        self.state = api_app.state
        self.fast = fast
        self.counts = counts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            endpoint = self.fast.get((scope["method"], scope["path"]))
            if endpoint is not None:
                try:
                    response = await endpoint(ProxyRequest(scope, receive))
                except Exception as exc:  # never a stack trace to the client
                    log.error("internal error on %s: %s", scope["path"], type(exc).__name__)
                    response = _error(500, "internal error in reef serve (see the server log)")
                await response(scope, receive, send)
                return
            if self.counts is not None:
                await self._counted(scope, receive, send, self.counts)
                return
        await self.api(scope, receive, send)

    async def _counted(self, scope: Scope, receive: Receive, send: Send, counts: Metrics) -> None:
        """An API request, counted by its route's template once it is answered."""
        started = time.perf_counter()
        status = 500  # what the server sends when the app fails before answering

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.api(scope, receive, sending)
        finally:
            route, scenario = api_labels(scope, status)
            counts.api(route, scenario, status, time.perf_counter() - started)


def create_app(
    config: ServeConfig,
    *,
    tokens: TokenSet | None,
    store: Store | None = None,
    jobs: JobRunner | None = None,
    weights: WeightVersion | None = None,
) -> ReefApp:
    """Build the app. ``tokens=None`` means open (no auth): callers decide when that is
    allowed. ``jobs`` runs `POST /reef/evolve` jobs; the caller wires it in (`reef serve`
    passes ``recipes.engine.worker.Worker``), so the server itself knows no recipe. Without it the
    server answers 503 to job submissions. ``weights`` (reefd) stamps each record with the
    engine's weight version at request start. With ``config.reef`` (the live loop) the
    server also submits jobs itself when a scenario's evidence is ready, so it needs
    ``jobs``. ``store`` defaults to the one ``REEF_DATABASE_URL`` / ``database_url`` names
    (the SQLite file in the state dir when none is set); the app closes a store it opened."""
    if config.reef is not None and jobs is None:
        raise errors.ServeError(
            "the live loop (`reef:` / --recipe) needs a job runner", "run it with `reef serve`"
        )
    upstream = Upstream.from_config(config)
    owns_store = store is None
    store = store if store is not None else open_store(configured=config.database_url)
    recorder = (
        Recorder(
            store,
            max_backlog_bytes=config.max_record_backlog_bytes,
            writer=config.record_writer,
        )
        if config.record
        else None
    )
    releases = ReleaseCache(config.release_cache_seconds)
    auth = Authenticator(tokens)
    proxy = Proxy(config, upstream, auth, recorder, releases, weights)
    worker = jobs
    loop = (
        LiveLoop(config.reef, store, jobs) if config.reef is not None and jobs is not None else None
    )
    # a team's housekeeping: pull chain remotes (a publish anywhere is served here within
    # remote_poll_seconds), keep records within the configured budget, and hand memory
    # back after large answers
    housekeeping: list[RemoteSync | RetentionTask | Trimmer] = [
        RemoteSync(config.remote_poll_seconds),
        RetentionTask(store),
        proxy.trimmer,
    ]

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.started, app.state.started_at = time.monotonic(), now_iso()
        if recorder is not None:
            recorder.start()
        await proxy.start()
        if worker is not None:
            worker.start()
        if loop is not None:
            loop.start()  # after the worker: the first poll may submit a job
        for task in housekeeping:
            task.start()
        try:
            yield
        finally:
            for task in housekeeping:
                task.stop()
            if loop is not None:
                loop.stop()
            if worker is not None:
                worker.stop()
            await proxy.stop()
            if recorder is not None:
                recorder.stop()
            if owns_store:
                store.close()

    app = FastAPI(
        title="Reef",
        version="1",
        description="The Reef recording proxy and API. Inference routes (/v1/...) speak the "
        "OpenAI and Anthropic dialects; see docs/api.md.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.config = config
    app.state.upstream = upstream
    app.state.store = store
    app.state.recorder = recorder
    app.state.releases = releases
    app.state.auth = auth
    app.state.proxy = proxy
    app.state.jobs = worker
    app.state.learning = loop
    app.state.housekeeping = housekeeping
    app.state.started, app.state.started_at = time.monotonic(), now_iso()  # again at start-up
    counts = app.state.metrics = Metrics(app.state) if config.metrics else None
    proxy.metrics = counts

    inference_schema.install(app, proxy)  # the /v1 routes, their bodies in /openapi.json
    api.install(app)
    api_jobs.install(app)
    api_learning.install(app)
    api_status.install(app)
    console.install(app)
    if counts is not None:
        metrics.install(app)

    @app.exception_handler(errors.ReefError)
    async def reef_error(request: Request, exc: errors.ReefError) -> JSONResponse:
        status = exc.http_status
        if status >= 500:
            log.error("%s: %s", type(exc).__name__, exc.one_line())
        return _error(status, exc.message, exc.hint, type=type(exc).__name__, **exc.details())

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": ("body",), "msg": "invalid"}
        loc = [str(p) for p in first.get("loc", ()) if p != "body"] or ["body"]
        field = "body" if first.get("type") == "json_invalid" else ".".join(loc)
        msg = str(first.get("msg", "invalid")).removeprefix("Value error, ")
        return _error(400, f"{field}: {msg}", field=field, type="ValidationError")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def crash(request: Request, exc: Exception) -> JSONResponse:
        log.error(
            "internal error on %s %s: %s", request.method, request.url.path, type(exc).__name__
        )
        return _error(500, "internal error in reef serve (see the server log)")

    fast = {
        ("POST", ROUTES["openai"]): proxy.chat_completions,
        ("POST", ROUTES["anthropic"]): proxy.messages,
        ("POST", ROUTES["responses"]): proxy.responses,
        ("POST", ROUTES["embeddings"]): proxy.embeddings,
    }
    return ReefApp(app, fast, counts)

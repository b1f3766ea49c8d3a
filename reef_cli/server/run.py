"""Start `reef serve`: resolve tokens, refuse unsafe binds, run uvicorn."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from reef_cli.core import tokens
from reef_cli.core.errors import ServeError
from reef_cli.core.jobs import JobRunner
from reef_cli.server import log_redaction
from reef_cli.server.config import ServeConfig


def token_set(config: ServeConfig) -> tokens.TokenSet | None:
    """The tokens to accept; ``None`` for an open server (loopback only)."""
    if config.open:
        if not config.is_loopback():
            raise ServeError(
                f"refusing to serve {config.host} without a token: only loopback binds may be open",
                "drop --open (clients then send the token from `reef token`), or bind 127.0.0.1",
            )
        return None
    main = tokens.main_token(create=True)
    if not main:
        raise ServeError("no token available", "set REEF_TOKEN or check the state dir")
    tokens.list_scoped()  # a damaged tokens.json: refuse to start, with the fix
    return tokens.FileTokens()  # re-read when the files change: `reef token` applies at once


def reload_tokens_on_sighup(accepted: tokens.TokenSet | None) -> None:
    """SIGHUP re-reads the token files (they are also re-read when they change); only in
    the main thread, where a signal handler can be set."""
    import signal
    import threading

    if not isinstance(accepted, tokens.FileTokens):
        return
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGHUP"):
        return

    def reload(signum: int, frame: object) -> None:
        # not here: the handler may interrupt a reload holding the lock in this thread
        threading.Thread(target=accepted.reload, name="reef-token-reload", daemon=True).start()

    signal.signal(signal.SIGHUP, reload)


def with_default_upstream(config: ServeConfig) -> tuple[ServeConfig, object | None]:
    """No upstream given: the configured model (``REEF_MODEL``) if any, else the embedded
    model, served in-process on a private loopback port."""
    if config.upstream and config.upstream != "embedded":
        return config, None
    from reef_cli.core.llm import default_model, endpoint_for

    model, api_base = default_model()
    endpoint = endpoint_for(model, api_base)
    if endpoint.url is not None:
        return config.model_copy(
            update={
                "upstream": endpoint.url,
                "upstream_model": config.upstream_model or endpoint.model,
                "upstream_dialect": endpoint.dialect,
                "upstream_key_env": config.upstream_key_env or endpoint.key_env,
            }
        ), None
    from reef_cli.server.embedded_upstream import create_embedded_app
    from reef_cli.server.thread import ServerThread

    thread = ServerThread(create_embedded_app()).start()
    return config.model_copy(
        update={
            "upstream": thread.url + "/v1",
            "upstream_dialect": "openai",
        }
    ), thread


def configure_logging(upstream_key: str | None = None, db_password: str | None = None) -> None:
    """Reef's log lines go to stderr, and no line of any logger names a credential: the
    redacting filter goes on the root handler, Reef's and uvicorn's loggers (uvicorn's own
    handlers get it from ``uvicorn_options``), with this server's token and the upstream
    key (and the database password) as exact values to hide."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    log_redaction.add_secret(tokens.main_token(create=False), upstream_key, db_password)
    log_redaction.install()


def settle_heap() -> None:
    """Move what start-up built (modules, the app, the database pool) out of the cyclic
    GC's reach: a full collection then scans only what serving allocates. Without it a
    full pass over the start-up heap paused every thread for 30-70 ms, a few times a
    minute under load — the c=1 p99 on the PostgreSQL store (docs/performance.md)."""
    import gc

    gc.collect()
    gc.freeze()


def uvicorn_options(config: ServeConfig) -> dict[str, Any]:
    """uvicorn settings for `reef serve` (less host and port): its logging is configured
    with the redacting filter, so no log line (the access log included) carries a
    credential, whatever the route answered."""
    return {
        "log_level": "info",
        "log_config": log_redaction.uvicorn_log_config(),
        "access_log": config.access_log,
        "timeout_keep_alive": 30,
        "h11_max_incomplete_event_size": 64 * 1024,
    }


def serve(
    config: ServeConfig,
    announce: Callable[[str], None] = print,
    jobs: JobRunner | None = None,
) -> None:
    """Run `reef serve` in the foreground; ``jobs`` runs evolution jobs (see create_app)."""
    import sys

    import uvicorn

    # The recorder thread parses and inserts while the event loop relays; a short GIL
    # switch interval keeps it from holding up a response for the default 5 ms.
    sys.setswitchinterval(0.0002)

    from reef_cli.core.store import url
    from reef_cli.server.app import create_app

    accepted = token_set(config)
    if config.database_url and not os.environ.get(url.ENV):
        # serve.yaml's database applies to the whole process: the jobs it runs and the
        # recipes they start open the store the same way (sandboxed agents see no env)
        os.environ[url.ENV] = config.database_url
    config, _embedded_thread = with_default_upstream(config)  # lives as long as serve
    app = create_app(config, tokens=accepted, jobs=jobs)
    upstream = app.state.upstream
    auth = (
        "open (loopback, no token)" if accepted is None else "bearer token (`reef token` prints it)"
    )
    target = f"{upstream.base} ({upstream.dialect})"
    if _embedded_thread is not None:
        target = f"the embedded model, in-process at {upstream.base}"
    announce(
        f"reef serve: http://{config.host}:{config.port} -> {target}; auth: {auth}; "
        f"recording: {f'on ({app.state.store.url})' if config.record else 'off'}"
    )
    configure_logging(upstream.key, url.password_of(url.database_url()))
    reload_tokens_on_sighup(accepted)
    settle_heap()
    try:
        uvicorn.run(app, host=config.host, port=config.port, **uvicorn_options(config))
    except OSError as exc:
        raise ServeError(
            f"cannot bind {config.host}:{config.port}: {exc.strerror}", "pick another --port"
        ) from exc

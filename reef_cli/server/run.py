"""Start `reef serve`: resolve tokens, refuse unsafe binds, run uvicorn."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from typing import Any

from reef_cli.core import tokens
from reef_cli.core.errors import ServeError
from reef_cli.core.jobs import JobRunner
from reef_cli.server import log_redaction
from reef_cli.server.serve_config import ServeConfig


def token_set(config: ServeConfig) -> tokens.TokenSet | None:
    """The tokens to accept; ``None`` for an open server (loopback only)."""
    if config.metrics_open and not config.is_loopback():
        raise ServeError(
            f"refusing to serve /metrics on {config.host} without a token: only loopback "
            "binds may set metrics_open",
            "drop metrics_open (Prometheus can send the token: `authorization: "
            "{credentials_file: ...}` in its scrape config), or bind 127.0.0.1",
        )
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
    # re-read when the files change (`reef token` applies at once); a rotated main token
    # is redacted from the logs from the moment it is read
    return tokens.FileTokens(on_main=log_redaction.add_secret)


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


def _free_port_near(host: str, port: int) -> int | None:
    """A port after ``port`` that ``host`` can bind now (for the fix a busy port names)."""
    for candidate in range(port + 1, min(port + 50, 65536)):
        probe = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        try:
            probe.bind((host, candidate))
        except OSError:
            continue
        finally:
            probe.close()
        return candidate
    return None


def bind(config: ServeConfig) -> socket.socket:
    """The listening socket, bound before anything is announced: a busy port is one line
    that says what to do, not a banner followed by uvicorn's ``[Errno 98]``."""
    import errno

    where = f"{config.host}:{config.port}"
    sock = socket.socket(socket.AF_INET6 if ":" in config.host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((config.host, config.port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            free = _free_port_near(config.host, config.port)
            other = free if free is not None else "PORT"
            raise ServeError(
                f"port {config.port} is in use ({where})",
                f"--port {other} or stop the other server",
            ) from None
        if exc.errno == errno.EACCES:
            raise ServeError(
                f"cannot bind {where}: permission denied", "use a port above 1023, e.g. --port 8901"
            ) from None
        raise ServeError(
            f"cannot bind {where}: {exc.strerror or exc}",
            "--host 127.0.0.1 (or an address of this machine)",
        ) from None
    except (ValueError, UnicodeError) as exc:  # a host no resolver takes (NUL, bad IDNA)
        sock.close()
        raise ServeError(
            f"cannot bind {config.host!r}: {exc}", "--host 127.0.0.1 (or this machine's name)"
        ) from None
    return sock


def serve(
    config: ServeConfig,
    announce: Callable[[str], None] = print,
    jobs: JobRunner | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Run `reef serve` in the foreground; ``jobs`` runs evolution jobs (see create_app).
    ``sock``: the socket :func:`bind` made (bound here when not given); it is closed after."""
    listener = sock if sock is not None else bind(config)
    try:
        _serve(config, announce, jobs, listener)
    finally:
        listener.close()


def _serve(
    config: ServeConfig,
    announce: Callable[[str], None],
    jobs: JobRunner | None,
    listener: socket.socket,
) -> None:
    import sys

    import uvicorn

    # Threads beside the event loop take the GIL now and then (the release cache's
    # reloads, the record writer's reports; the writer thread with `record_writer:
    # thread`): a short switch interval hands it back to the loop within 0.2 ms instead
    # of Python's 5 ms, so none of them holds up a response for long.
    sys.setswitchinterval(0.0002)

    from reef_cli.core import store_url as url
    from reef_cli.core.store import database_url
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
        f"recording: {f'on ({app.state.store.url})' if config.record else 'off'}; "
        f"console: http://{config.host}:{config.port}/reef/ui"
    )
    configure_logging(upstream.key, url.password_of(database_url()))
    from reef_cli.server import memory

    memory.tune()  # freed answers go back to the system (memory.py says why)
    reload_tokens_on_sighup(accepted)
    settle_heap()
    options = uvicorn_options(config)
    server = uvicorn.Server(uvicorn.Config(app, host=config.host, port=config.port, **options))
    server.run(sockets=[listener])

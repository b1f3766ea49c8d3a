"""Run an ASGI app on a real uvicorn server in a background thread (trial proxies, tests)."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from typing import Any

import uvicorn


class QuietConfig(uvicorn.Config):
    """A uvicorn Config that leaves the process's logging as it is. uvicorn's own
    ``configure_logging`` re-applies its default config and, with ``access_log=False``,
    empties the ``uvicorn.access`` logger for the whole process: a trial gateway started
    inside `reef serve` would switch off the main server's access log and its filters."""

    def configure_logging(self) -> None:
        logging.addLevelName(5, "TRACE")


class ServerThread:
    """``with ServerThread(app) as srv: srv.url`` — a live server on a free loopback port
    (or on ``port``)."""

    def __init__(
        self, app: Any, host: str = "127.0.0.1", port: int = 0, **uvicorn_options: Any
    ) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit it: without it each small answer waits ~40 ms for
        # a delayed ACK (asyncio sets it only on sockets it creates itself).
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.bind((host, port))
        self.host, self.port = self.sock.getsockname()[:2]
        options: dict[str, Any] = {
            "log_level": "warning",
            "access_log": False,
            "lifespan": "on",
            **uvicorn_options,
        }
        # Only a server that brings its own log config may touch the process's logging.
        config_class = uvicorn.Config if "log_config" in uvicorn_options else QuietConfig
        self.config = config_class(app, **options)
        self.server = uvicorn.Server(self.config)
        self.thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _run(self) -> None:
        asyncio.run(self.server.serve(sockets=[self.sock]))

    def start(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("server thread did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

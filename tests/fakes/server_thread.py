"""Tests use the same server thread as trial proxies do."""

from reef_cli.server.thread import ServerThread

__all__ = ["ServerThread"]

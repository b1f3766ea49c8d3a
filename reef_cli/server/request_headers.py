"""The proxy's request: Starlette's, with headers looked up in a dict built once.

An inference request reads about ten headers (the token, scenario, content type and
length, release, session, trace, tags). Starlette's ``Headers`` scans the header list on
every lookup and raises a ``KeyError`` for each absent one, which most of them are: 8.6 µs
a request against 1.6 µs for one dict (timeit; docs/performance.md)."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import Headers
from starlette.requests import Request


class DictHeaders(Headers):
    """``Headers`` with the same answers: names are case-insensitive, and of a repeated
    name ``get`` and ``[]`` give the first value (``getlist`` gives them all)."""

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        super().__init__(raw=raw)
        self._first = {k.decode("latin-1"): v.decode("latin-1") for k, v in reversed(raw)}

    def get(self, key: str, default: Any = None) -> Any:
        return self._first.get(key.lower(), default)

    def __getitem__(self, key: str) -> str:
        return self._first[key.lower()]

    def __contains__(self, key: Any) -> bool:
        return isinstance(key, str) and key.lower() in self._first


class ProxyRequest(Request):
    """What ``ReefApp`` hands the proxy's routes."""

    @property
    def headers(self) -> Headers:
        if not hasattr(self, "_headers"):
            self._headers = DictHeaders(list(self.scope["headers"]))
        return self._headers

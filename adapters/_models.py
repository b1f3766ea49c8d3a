"""Which model ids an install names: the caller's, what `reef serve` lists, or what the
last install named."""

from __future__ import annotations

import os
from collections.abc import Callable

from adapters.base import Routing

DEFAULT = "default"  # what `reef serve` answers to when nothing better is known


def served(routing: Routing) -> list[str]:
    """Model ids `reef serve` lists (``GET /v1/models``, 2 s), or [] when it does not answer."""
    import httpx

    from reef_cli.core import tokens

    try:
        token = os.environ.get(routing.token_env) or tokens.main_token(create=False)
        headers = {"authorization": f"Bearer {token}"} if token else {}
        headers["x-reef-scenario"] = routing.scenario
        resp = httpx.get(routing.base_url.rstrip("/") + "/v1/models", headers=headers, timeout=2)
        if resp.status_code != 200:
            return []
        data = resp.json().get("data") or []
        return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")][:20]
    except (httpx.HTTPError, ValueError, OSError, AttributeError):
        return []


def choose(
    given: list[str] | None,
    routing: Routing,
    *,
    discover: bool,
    installed: Callable[[], list[str]],
) -> list[str]:
    """``given``, else what serve lists (when ``discover``), else ``installed()``, else
    ``["default"]``."""
    if given:
        return given
    found = served(routing) if discover else []
    return found or installed() or [DEFAULT]

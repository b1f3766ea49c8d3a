"""Bearer-token auth for `reef serve`: who is calling, and which scenarios they may touch."""

from __future__ import annotations

from collections.abc import Mapping

from reef_cli.core.tokens import Grant, TokenSet

OPEN = Grant("open", None)


def presented(headers: Mapping[str, str], allow_api_key: bool) -> str | None:
    """The token a request carries: ``Authorization: Bearer``, or ``x-api-key`` if allowed."""
    auth = headers.get("authorization")
    if auth:
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    if allow_api_key:
        key = headers.get("x-api-key")
        if key:
            return key.strip()
    return None


class Authenticator:
    def __init__(self, tokens: TokenSet | None) -> None:
        self.tokens = tokens

    @property
    def open(self) -> bool:
        return self.tokens is None

    def grant(self, headers: Mapping[str, str], allow_api_key: bool = True) -> Grant | None:
        """The caller's grant, or None when the token is missing or wrong."""
        if self.tokens is None:
            return OPEN
        return self.tokens.check(presented(headers, allow_api_key))

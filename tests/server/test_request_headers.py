"""The proxy's dict-backed headers answer as Starlette's own do."""

from __future__ import annotations

import pytest
from starlette.datastructures import Headers

from reef_cli.server.request_headers import DictHeaders, ProxyRequest

RAW = [
    (b"host", b"127.0.0.1:8000"),
    (b"authorization", b"Bearer first"),
    (b"content-type", b"application/json"),
    (b"authorization", b"Bearer second"),  # repeated: the first one wins, as in Starlette
    (b"x-reef-tag-team", b"caf\xe9"),  # latin-1, as ASGI servers hand header bytes over
]
NAMES = ["authorization", "Authorization", "CONTENT-TYPE", "x-reef-tag-team", "x-api-key", ""]


@pytest.mark.parametrize("name", NAMES)
def test_every_lookup_answers_as_starlettes(name: str) -> None:
    ours, theirs = DictHeaders(list(RAW)), Headers(raw=list(RAW))
    assert ours.get(name) == theirs.get(name)
    assert ours.get(name, "default") == theirs.get(name, "default")
    assert (name in ours) == (name in theirs)
    if name in theirs:
        assert ours[name] == theirs[name]
    else:
        with pytest.raises(KeyError):
            ours[name]


def test_the_rest_of_the_mapping_is_starlettes() -> None:
    ours = DictHeaders(list(RAW))
    assert ours.raw == RAW
    assert ours.getlist("authorization") == ["Bearer first", "Bearer second"]
    assert len(ours) == len(RAW)
    assert 3 not in ours  # not a name: absent, no error


def test_the_proxy_request_builds_them_once() -> None:
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": RAW}
    request = ProxyRequest(scope)
    assert isinstance(request.headers, DictHeaders)
    assert request.headers is request.headers
    assert request.headers.get("authorization") == "Bearer first"

"""docs/api.md's route tables are the app's routes, both ways, and /openapi.json describes
every one of them (the inference routes' request bodies included)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from reef_cli.server.app import ReefApp, create_app
from reef_cli.server.serve_config import ServeConfig

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\|\s*`(GET|POST|PUT|PATCH|DELETE) (/[^`\s?]*)")
INFERENCE = {
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/messages"),
    ("POST", "/v1/responses"),
    ("POST", "/v1/messages/count_tokens"),
    ("GET", "/v1/models"),
}


def _shape(path: str) -> str:
    """``/reef/jobs/{job_id}`` and ``/reef/jobs/{id}`` are one route: names differ in prose."""
    return re.sub(r"\{[^}]*\}", "{}", path)


def documented() -> set[tuple[str, str]]:
    rows = set()
    for line in (ROOT / "docs" / "api.md").read_text().splitlines():
        match = ROW.match(line)
        if match:
            rows.add((match.group(1), _shape(match.group(2))))
    return rows


@pytest.fixture
def app(scripted) -> Iterator[ReefApp]:
    built = create_app(ServeConfig(upstream=scripted.server.url + "/v1"), tokens=None)
    try:
        yield built
    finally:
        built.state.store.close()


def _walk(routes: list, prefix: str = "") -> Iterator[tuple[str, str]]:
    for route in routes:
        inner = getattr(route, "original_router", None)  # an include_router, kept lazily
        if inner is not None:
            context = getattr(route, "include_context", None)
            yield from _walk(inner.routes, prefix + (getattr(context, "prefix", "") or ""))
            continue
        for method in getattr(route, "methods", None) or ():
            if method != "HEAD":  # HEAD comes free with GET
                yield method, _shape(prefix + route.path)


def served(app: ReefApp) -> set[tuple[str, str]]:
    """Every (method, path) the app answers: its routes and the fast path's."""
    return set(_walk(app.api.routes)) | {(m, _shape(path)) for m, path in app.fast}


def test_every_route_is_in_the_table_and_every_row_is_a_route(app: ReefApp) -> None:
    routes, rows = served(app), documented()
    assert routes >= INFERENCE  # the parser sees the fast path's routes
    assert sorted(routes - rows) == [], "served but not in docs/api.md's tables"
    assert sorted(rows - routes) == [], "in docs/api.md's tables but not served"


def test_the_route_table_parser_reads_both_tables() -> None:
    rows = documented()
    assert rows >= INFERENCE
    assert {("POST", "/reef/evolve"), ("GET", "/reef/jobs/{}")} <= rows
    assert ("GET", "/reef/harness/install") in rows


def test_openapi_lists_every_route_with_the_inference_bodies(app: ReefApp) -> None:
    schema = app.api.openapi()
    listed = {
        (method.upper(), _shape(path))
        for path, operations in schema["paths"].items()
        for method in operations
    }
    assert served(app) - {("GET", "/openapi.json")} <= listed
    for method, path in INFERENCE - {("GET", "/v1/models")}:
        operation = schema["paths"][path][method.lower()]
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        assert {"model"} <= set(body["required"]), path
        assert "messages" in body["properties"] or "input" in body["properties"], path


def test_curl_examples_send_a_content_type() -> None:
    """A JSON body without ``content-type: application/json`` is a 400 from the API."""
    for doc in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        text = doc.read_text()
        for command in re.findall(r"curl (?:[^\n]*\\\n)*[^\n]*", text):
            if re.search(r"\s(-d|--data\S*)\s", command):
                assert re.search(r"content-type: application/json", command, re.I), (
                    doc.name,
                    command,
                )


def test_inference_routes_still_reach_the_proxy(make_stack) -> None:
    """Routed through FastAPI for the schema, count_tokens and models still answer as
    the proxy does, on a real server."""
    from tests.server.conftest import TOKEN

    stack = make_stack("openai")
    headers = {"authorization": f"Bearer {TOKEN}"}
    models = httpx.get(stack.url + "/v1/models", headers=headers, timeout=10)
    count = httpx.post(
        stack.url + "/v1/messages/count_tokens",
        headers=headers,
        json={"model": "m", "messages": [{"role": "user", "content": "hello there"}]},
        timeout=10,
    )
    assert models.status_code == 200 and models.json()["data"]
    assert count.status_code == 200 and count.json()["input_tokens"] > 0
    assert httpx.get(stack.url + "/v1/models", timeout=10).status_code == 401

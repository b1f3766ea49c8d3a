"""Ollama discovery against a stand-in server speaking Ollama's /api/tags."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from reef_cli.cli.doctor_checks import run_checks
from reef_cli.core.ollama_local import local_models
from tests.fakes.server_thread import ServerThread


async def tags(_request: object) -> JSONResponse:
    return JSONResponse(
        {
            "models": [
                {
                    "name": "qwen2.5:0.5b",
                    "model": "qwen2.5:0.5b",
                    "size": 1,
                    "digest": "a" * 64,
                    "modified_at": "2026-11-01T00:00:00Z",
                    "details": {},
                },
                {
                    "name": "llama3.2:latest",
                    "model": "llama3.2:latest",
                    "size": 1,
                    "digest": "b" * 64,
                    "modified_at": "2026-11-01T00:00:00Z",
                    "details": {},
                },
            ]
        }
    )


def test_models_are_offered_when_ollama_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    with ServerThread(Starlette(routes=[Route("/api/tags", tags)])) as server:
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        assert local_models() == ["llama3.2:latest", "qwen2.5:0.5b"]
        row = next(r for r in run_checks() if r.name == "ollama")
        assert row.status == "ok" and "ollama/llama3.2:latest" in row.detail


def test_no_server_means_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
    assert local_models() is None
    row = next(r for r in run_checks() if r.name == "ollama")
    assert row.status == "warn" and row.fix

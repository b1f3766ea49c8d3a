"""A scripted model on a real port for recipe tests, reached through LiteLLM like any
configured endpoint (``openai/<name>`` + ``api_base``); the ``scripted`` fixture is in
tests/conftest.py."""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.server_thread import ServerThread
from tests.fakes.upstream import FakeUpstream, Turn


def draft_json(**overrides: Any) -> str:
    draft = {
        "kind": "rule",
        "name": "failing-test-first",
        "description": "Reproduce bugs with a failing test first",
        "body": "Before fixing a bug, write a failing test that reproduces it (reef-e2e-7c1d).",
        "why": "The developer wants bugs reproduced before they are fixed.",
    }
    draft.update(overrides)
    return json.dumps(draft)


class Scripted:
    def __init__(self) -> None:
        self.fake = FakeUpstream(default=Turn(text="I will write a failing test first."))
        self.server = ServerThread(self.fake.app, timeout_graceful_shutdown=1)

    @property
    def api_base(self) -> str:
        return self.server.url + "/v1"

    def push(self, *texts: str, **turn: Any) -> None:
        self.fake.push(*(Turn(text=text, **turn) for text in texts))

    def inference(self) -> list[Any]:
        return [e for e in self.fake.log if e.path == "/v1/chat/completions"]

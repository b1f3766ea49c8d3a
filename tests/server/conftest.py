from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.core.tokens import ScopedToken, TokenSet, digest
from reef_cli.server.app import create_app
from reef_cli.server.serve_config import ServeConfig
from tests.fakes.server_thread import ServerThread
from tests.fakes.upstream import FakeUpstream

TOKEN = "reef_test_token_0123456789"
LIMITED = "reef_limited_token_abcdef"
# the smallest valid request body of each inference route, by path
ROUTE_BODIES: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    "/v1/messages": {
        "model": "m",
        "max_tokens": 9,
        "messages": [{"role": "user", "content": "hi"}],
    },
    "/v1/responses": {"model": "m", "input": "hi"},
}


@dataclass
class Stack:
    fake: FakeUpstream
    upstream: ServerThread
    reef: ServerThread
    app: Any
    home: Path

    @property
    def url(self) -> str:
        return self.reef.url

    def store(self) -> SQLiteStore:
        return SQLiteStore(self.home / "records.sqlite3")

    def flush(self) -> None:
        assert self.app.state.recorder.flush(10)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "reef-home"
    monkeypatch.setenv("REEF_HOME", str(root))
    monkeypatch.delenv("REEF_TOKEN", raising=False)
    return root


@pytest.fixture
def make_stack(home: Path) -> Iterator[Callable[..., Stack]]:
    started: list[ServerThread] = []

    def make(dialect: str = "openai", fake: FakeUpstream | None = None, **options: Any) -> Stack:
        fake = fake or FakeUpstream()
        up = ServerThread(fake.app).start()
        started.append(up)
        config = ServeConfig(upstream=up.url + "/v1", upstream_dialect=dialect, **options)
        scoped = [ScopedToken("limited", digest(LIMITED).hex(), ("team-a",))]
        app = create_app(config, tokens=TokenSet(TOKEN, scoped))
        reef = ServerThread(app).start()
        started.append(reef)
        return Stack(fake, up, reef, app, home)

    yield make
    for server in reversed(started):
        server.stop()

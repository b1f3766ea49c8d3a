"""The real Codex CLI through `reef serve` to an upstream that speaks the Responses API
itself (`upstream_responses: true`): the request is relayed as bytes, not translated, the
answer comes back with its receipt, and the record says so."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters import get
from adapters.base import Gateway
from tests.e2e import agent_rig
from tests.e2e.conftest import RULE_R1, SCENARIO, TOKEN, ReefServer, tree_files
from tests.fakes.server_thread import ServerThread
from tests.fakes.upstream import FakeUpstream, Turn

pytestmark = agent_rig.needs("codex", "the Codex CLI")


@pytest.fixture
def responses_stack(reef_home: Path) -> Iterator[tuple[FakeUpstream, ReefServer]]:
    from reef_cli.core.tokens import TokenSet
    from reef_cli.server.app import create_app
    from reef_cli.server.serve_config import ServeConfig

    fake = FakeUpstream(default=Turn(text="Relayed answer."))
    with ServerThread(fake.app) as upstream:
        config = ServeConfig(
            upstream=upstream.url + "/v1",
            upstream_dialect="openai",
            upstream_responses=True,
            release_cache_seconds=0,
        )
        app = create_app(config, tokens=TokenSet(TOKEN))
        with ServerThread(app) as server:
            yield fake, ReefServer(app, server, TOKEN, reef_home)


def test_codex_through_reef_to_a_responses_upstream(
    responses_stack: tuple[FakeUpstream, ReefServer], tmp_path: Path
) -> None:
    fake, reef = responses_stack
    work = tmp_path / "work"
    work.mkdir()
    gateway = Gateway(reef.url, SCENARIO, TOKEN, "fake-model")
    transcript = get("codex").run_headless(
        tree_files(RULE_R1), "Say hello.", work, gateway, timeout=120
    )
    assert transcript.ok, transcript.stderr[-2000:]
    assert "Relayed answer." in transcript.stdout
    sent = [e for e in fake.log if e.path == "/v1/responses"]
    assert sent and not [e for e in fake.log if e.path == "/v1/chat/completions"]
    assert RULE_R1 in json.dumps(sent[0].body)  # Codex's own request, as it sent it
    records = reef.records(session_id=transcript.session_id)
    assert records and all(r.client_dialect == "responses" for r in records)
    assert all(r.upstream_dialect == "responses" and r.status == 200 for r in records)
    assert "Relayed answer." in json.dumps(records[-1].response)

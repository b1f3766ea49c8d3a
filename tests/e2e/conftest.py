"""Shared fixtures for end-to-end tests that drive real agent binaries.

- ``fake_model``: the scripted model server (tests/fakes/upstream.py) on a real port.
- ``reef_server``: a real ``reef serve`` app (create_app) on uvicorn in a thread, in front
  of ``fake_model``, recording into ``$REEF_HOME``; ``.url``, ``.token``, ``.records()``.
- ``scenario_with_releases``: scenario ``e2e`` with two published releases whose texts
  carry unique markers (``RULE_R1`` …), and ``.publish(...)`` for more.

Every test already has its own empty ``REEF_HOME`` (tests/conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.server_thread import ServerThread
from tests.fakes.upstream import FakeUpstream, Logged, Turn

TOKEN = "reef_e2e_token_0123456789abcdef"
SCENARIO = "e2e"
RULE_R1 = "Always answer in exactly three words (reef-rule-r1-7f3a)."
RULE_R2 = "Quote the file name before any change (reef-rule-r2-91bc)."
RULE_R3 = "Prefer small commits (reef-rule-r3-c55e)."
SKILL_NAME = "bisect-regressions"
SKILL_DESCRIPTION = "Find the commit that broke a test with git bisect (reef-skill-d41d)."


@dataclass
class FakeModel:
    fake: FakeUpstream
    server: ServerThread

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def log(self) -> list[Logged]:
        return self.fake.log

    def inference(self) -> list[Logged]:
        """Logged model requests (chat or messages), not model listings."""
        return [e for e in self.fake.log if e.path in ("/v1/chat/completions", "/v1/messages")]

    def push(self, *turns: Turn) -> None:
        self.fake.push(*turns)


@dataclass
class ReefServer:
    app: Any
    server: ServerThread
    token: str
    home: Path

    @property
    def url(self) -> str:
        return self.server.url

    def records(self, **filters: Any) -> list[Any]:
        """Stored records, oldest first, after waiting for the recorder to catch up."""
        from reef_cli.core.store.sqlite import SQLiteStore

        assert self.app.state.recorder.flush(10), "the recorder did not catch up"
        store = SQLiteStore()
        try:
            return store.list(limit=None, oldest_first=True, **filters)
        finally:
            store.close()


@dataclass
class Scenario:
    name: str
    releases: dict[int, dict[str, str]] = field(default_factory=dict)

    def publish(self, files: dict[str, str], reason: str) -> int:
        from reef_cli.core.publishing import publish_files

        release, _ = publish_files(self.name, files, reason=reason, reviewed=True)
        self.releases[release.number] = dict(files)
        return release.number


def tree_files(rule: str, skill_description: str = SKILL_DESCRIPTION) -> dict[str, str]:
    """A small harness tree: one rule, one skill, one command."""
    return {
        "reef.toml": "format = 1\n\n[requires]\nbinaries = []\nenv = []\n",
        "rules/house-style.md": f"# House style\n\n{rule}\n",
        f"skills/{SKILL_NAME}/SKILL.md": (
            f"---\nname: {SKILL_NAME}\ndescription: {skill_description}\n---\n\n"
            "Run `git bisect start`, mark good and bad, run the failing test at each step.\n"
        ),
        "commands/summarize.md": (
            "---\ndescription: Summarize the repository\n---\n\nSummarize $ARGUMENTS briefly.\n"
        ),
    }


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    fake = FakeUpstream(default=Turn(text="Reef fake answer."))
    with ServerThread(fake.app) as server:
        yield FakeModel(fake, server)


@pytest.fixture
def reef_server(fake_model: FakeModel, reef_home: Path) -> Iterator[ReefServer]:
    from reef_cli.core.tokens import TokenSet
    from reef_cli.server.app import create_app
    from reef_cli.server.serve_config import ServeConfig

    config = ServeConfig(
        upstream=fake_model.url + "/v1", upstream_dialect="openai", release_cache_seconds=0
    )
    app = create_app(config, tokens=TokenSet(TOKEN))
    with ServerThread(app) as server:
        yield ReefServer(app, server, TOKEN, reef_home)


@pytest.fixture
def scenario_with_releases(reef_home: Path) -> Scenario:
    from reef_cli.core import scenarios

    scenarios.create(SCENARIO)
    scenario = Scenario(SCENARIO)
    scenario.publish(tree_files(RULE_R1), "first release")
    scenario.publish(tree_files(f"{RULE_R1}\n{RULE_R2}"), "quote file names before editing")
    return scenario

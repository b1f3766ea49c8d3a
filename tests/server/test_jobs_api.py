"""`POST /reef/evolve` hands jobs to the runner the server was given (``JobRunner``):
the server itself runs no recipe."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from reef_cli.core import jobs, scenarios
from reef_cli.core.tokens import TokenSet
from reef_cli.server.app import create_app
from reef_cli.server.serve_config import ServeConfig
from tests.fakes.server_thread import ServerThread
from tests.server.conftest import TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}"}


class Recording:
    """A JobRunner that only remembers what it was asked to do."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.jobs: list[jobs.Job] = []

    def start(self) -> None:
        self.calls.append("start")

    def stop(self) -> None:
        self.calls.append("stop")

    def submit(self, job: jobs.Job) -> None:
        self.jobs.append(job)


def serve(runner: Recording | None) -> ServerThread:
    config = ServeConfig(upstream="http://127.0.0.1:9/v1", default_scenario="team")
    return ServerThread(create_app(config, tokens=TokenSet(TOKEN, []), jobs=runner))


def job_files(home: Path) -> list[Path]:
    return sorted((home / "jobs").glob("job_*.json")) if (home / "jobs").is_dir() else []


def test_jobs_go_to_the_injected_runner_with_the_chosen_adapter(home: Path) -> None:
    scenarios.create("team")
    runner = Recording()
    with serve(runner) as server:
        assert runner.calls == ["start"]
        response = httpx.post(
            f"{server.url}/reef/evolve",
            json={"ask": "always explain the root cause first", "adapter": "claude-code"},
            headers=AUTH,
        )
        assert response.status_code == 202, response.text
    assert runner.calls == ["start", "stop"]
    [job] = runner.jobs
    assert (job.scenario, job.recipe, job.adapter) == ("team", "reefine", "claude-code")
    assert jobs.get(job.id).state == "queued"


def test_a_server_without_a_runner_refuses_jobs_and_stores_none(home: Path) -> None:
    scenarios.create("team")
    with serve(None) as server:
        response = httpx.post(
            f"{server.url}/reef/evolve", json={"ask": "always test first"}, headers=AUTH
        )
    assert response.status_code == 503
    assert response.json()["error"]["type"] == "ServeError"
    assert job_files(home) == []


@pytest.mark.parametrize(
    ("ask", "needle"),
    [
        ("", "empty"),
        ("always use sk-proj-" + "Zq3" * 16 + "T3BlbkFJ" + "m9X" * 8, "looks like a secret"),
    ],
)
def test_a_bad_ask_is_refused_before_a_job_exists(home: Path, ask: str, needle: str) -> None:
    scenarios.create("team")
    runner = Recording()
    with serve(runner) as server:
        response = httpx.post(f"{server.url}/reef/evolve", json={"ask": ask}, headers=AUTH)
    assert response.status_code == 422 and needle in response.json()["error"]["message"]
    assert "sk-proj" not in response.text
    assert runner.jobs == [] and job_files(home) == []


def test_quickstart_is_queued_as_a_job_of_the_quickstart_flow(home: Path) -> None:
    """`POST /reef/quickstart` queues the same flow `reef quickstart` runs; a token for
    every scenario may name a new one (the flow creates it), a scenario token may not."""
    from reef_cli.core.tokens import ScopedToken, digest

    runner = Recording()
    limited = "reef_sk_" + "l" * 32
    scoped = [ScopedToken("limited", digest(limited).hex(), ("quickstart", "fresh"))]
    app = create_app(
        ServeConfig(upstream="http://127.0.0.1:9/v1"), tokens=TokenSet(TOKEN, scoped), jobs=runner
    )
    with ServerThread(app) as server:
        made = httpx.post(f"{server.url}/reef/quickstart", json={}, headers=AUTH)
        assert made.status_code == 202, made.text
        other = {"authorization": f"Bearer {limited}"}
        refused = httpx.post(
            f"{server.url}/reef/quickstart", json={"scenario": "fresh"}, headers=other
        )
        bad = httpx.post(f"{server.url}/reef/quickstart", json={"ask": " "}, headers=AUTH)
        name = httpx.post(f"{server.url}/reef/quickstart", json={"scenario": "A B"}, headers=AUTH)
    assert refused.status_code == 404 and "unknown scenario 'fresh'" in refused.text
    assert bad.status_code == 422 and "empty" in bad.text
    assert name.status_code == 400 and "kebab-case" in name.text
    [job] = runner.jobs
    assert (job.flow, job.scenario, job.recipe) == ("quickstart", "quickstart", "reefine")
    assert job.ask is not None and job.ask.startswith("when I ask you to fix a bug")
    assert made.json()["flow"] == "quickstart"
    assert "fresh" not in [s.name for s in scenarios.list_all()]

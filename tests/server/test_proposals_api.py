"""``POST /reef/harness/proposals`` (issue 27, item 4): an agent proposes a change to the
served tree; a change that breaks the tree rules or holds a credential is refused at once
with nothing written; else a job gates it like any candidate and a passing change waits
in the inbox as a pending release until someone promotes it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from recipes.engine.worker import run_job
from reef_cli.core import jobs, proposals, scenarios
from reef_cli.core.publishing import publish_files
from reef_cli.core.tokens import ScopedToken, TokenSet, digest
from reef_cli.server.app import create_app
from reef_cli.server.serve_config import ServeConfig
from tests.fakes.jobs import KeptJobs
from tests.fakes.scripted import Scripted
from tests.fakes.server_thread import ServerThread
from tests.server.conftest import LIMITED, TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}"}
RULE = "rules/style.md"
TESTS_RULE = "rules/tests-first.md"
PROPOSAL = {
    "scenario": "shop",
    "reason": "reproduce a bug with a failing test before fixing it",
    "files": {
        TESTS_RULE: "When you fix a bug, first write a test that fails because of it. "
        "Run that test before and after the fix, and show both results.\n"
    },
}


@pytest.fixture
def server(home: Path):
    scenarios.create("shop")
    scenarios.create("team-a")
    publish_files("shop", {RULE: "Prefer small, tested changes.\n"}, reason="start")
    runner = KeptJobs()
    scoped = [ScopedToken("limited", digest(LIMITED).hex(), ("team-a",))]
    config = ServeConfig(upstream="http://127.0.0.1:9/v1")
    with ServerThread(create_app(config, tokens=TokenSet(TOKEN, scoped), jobs=runner)) as up:
        yield up, runner


def _propose(url: str, body=PROPOSAL, headers=AUTH) -> httpx.Response:
    return httpx.post(url + "/reef/harness/proposals", json=body, headers=headers)


def _job_files(home: Path) -> list[Path]:
    return sorted((home / "jobs").glob("job_*.json")) if (home / "jobs").is_dir() else []


def test_a_proposal_is_queued_for_review(server):
    up, runner = server
    r = _propose(up.url)
    assert r.status_code == 202, r.text
    job = r.json()
    assert (job["flow"], job["recipe"], job["publish"]) == ("proposal", "proposal", "review")
    assert job["ask"] == PROPOSAL["reason"] and job["options"]["files"] == PROPOSAL["files"]
    assert [j.id for j in runner.jobs] == [job["id"]]


@pytest.mark.parametrize(
    ("files", "status", "needle"),
    [
        (
            {"rules/keys.md": "Use the key sk-" + "proj-" + "a1B2c3D4" * 6 + " for calls.\n"},
            422,
            "secret",
        ),
        ({"../outside.md": "x"}, 400, "relative path"),
        ({"/etc/passwd": "x"}, 400, "relative path"),
        ({"rules//x.md": "x"}, 400, "relative path"),
        ({"rules/a\tb.md": "x"}, 400, "control character"),
        ({}, 400, "files"),
        ({RULE: "Prefer small, tested changes.\n"}, 409, "already is this tree"),
        ({"notes.txt": "loose file"}, 422, "notes.txt"),
    ],
)
def test_bad_proposals_write_nothing(server, home: Path, files, status, needle):
    up, runner = server
    before = scenarios.get("shop").chain().releases()
    r = _propose(up.url, {**PROPOSAL, "files": files})
    assert r.status_code == status, r.text
    assert needle in r.text
    assert "a1B2c3D4" not in r.text  # a credential is named by its rule, never echoed
    assert runner.jobs == [] and _job_files(home) == []
    assert scenarios.get("shop").chain().releases() == before


def test_who_may_propose(server, home: Path):
    up, runner = server
    assert _propose(up.url, headers={}).status_code == 401
    limited = {"authorization": f"Bearer {LIMITED}"}
    assert _propose(up.url, headers=limited).status_code == 403
    assert _propose(up.url, {**PROPOSAL, "scenario": "nope"}).status_code == 404
    assert _propose(up.url, {**PROPOSAL, "reason": "a\x1b[31m"}).status_code == 400
    assert _propose(up.url, {**PROPOSAL, "surprise": 1}).status_code == 400
    assert runner.jobs == [] and _job_files(home) == []


def test_the_job_gates_it_and_a_pass_waits_in_the_inbox(
    scripted: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REEF_MODEL", "openai/scripted")
    monkeypatch.setenv("REEF_API_BASE", scripted.api_base)
    scenarios.create("shop")
    publish_files("shop", {RULE: "Prefer small, tested changes.\n"}, reason="start")
    files = {**PROPOSAL["files"], RULE: None}  # adds one rule, removes the other
    job = jobs.create(
        "shop",
        jobs.PROPOSAL_RECIPE,
        PROPOSAL["reason"],
        options={"files": files},
        flow="proposal",
        publish="review",
    )
    scripted.push_judge(0.95)
    ended = run_job(job)
    assert ended.state == "pending", ended.message
    found = scenarios.get("shop")
    chain = found.chain()
    release = chain.get(ended.release)
    assert release.meta.status == "pending" and chain.served().number == 1  # not live yet
    assert chain.files(release) == {TESTS_RULE: PROPOSAL["files"][TESTS_RULE]}
    assert proposals.states(found) == {release.number: "pending"}
    assert ended.outcome["evidence"]["proposal"]["paths"] == [RULE, TESTS_RULE]

    # on topic, but against its own reason: the judge refuses it, and no release is made
    refused = jobs.create(
        "shop",
        jobs.PROPOSAL_RECIPE,
        PROPOSAL["reason"],
        options={
            "files": {
                RULE: "When you fix a bug, write the fix first and add a failing test only "
                "if there is time. Reproduce the bug by hand instead of in a test.\n"
            }
        },
        flow="proposal",
        publish="review",
    )
    scripted.push_judge(0.1)
    ended = run_job(refused)
    assert ended.state == "rejected", ended.message
    assert "judge" in ended.message
    assert len(chain.releases()) == 2

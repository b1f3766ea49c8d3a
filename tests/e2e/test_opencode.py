"""opencode end to end: the real binary (1.18.x, ``opencode run``) through a real
`reef serve` (uvicorn in a thread) to the scripted fake model. Each run has a temp HOME,
its own config dir and session store, and a timeout; the file takes well under a minute.

The generic contract (install round trip, the person's files, a recorded run, harvest,
the sandbox) is tests/e2e/test_adapter_contract.py; this file checks what is opencode's:
the merged JSONC is what opencode itself loads, the wrapper's run, the credit to the
installed release, no title call, and a sandboxed trial run reading an installed skill.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from adapters._install import uninstall
from adapters.base import Gateway
from adapters.opencode.adapter import OpenCodeAdapter
from tests.adapters.helpers import snapshot
from tests.e2e import agent_rig
from tests.e2e.conftest import (
    RULE_R1,
    RULE_R2,
    SKILL_DESCRIPTION,
    SKILL_NAME,
    FakeModel,
    ReefServer,
    Scenario,
    tree_files,
)
from tests.fakes.upstream import Turn

pytestmark = agent_rig.needs("opencode", "opencode")
RUN_TIMEOUT = 90
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "opencode"
PERSON_RULE = "Answer in British English."  # in tests/fixtures/opencode/AGENTS.md
ANSWER = "Bisect it first."


class Rig(agent_rig.Rig):
    """One person's machine with their own opencode config dir (from the fixtures)."""

    def __init__(self, tmp: Path, reef: ReefServer, scenario: str) -> None:
        super().__init__(tmp, reef, OpenCodeAdapter(), "opencode-config", scenario)
        for name in ("opencode.jsonc", "AGENTS.md"):
            shutil.copy(FIXTURES / name, self.target / name)
        (self.work / "notes.txt").write_text("the notes say: bisect (notes-5d1a)\n")

    def opencode(self, *args: str, session: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {**self.env(), "REEF_TOKEN": self.reef.token}
        if session is not None:
            env["REEF_SESSION_ID"] = session
        return self.wrapped(list(args), env, RUN_TIMEOUT)


@pytest.fixture
def rig(
    tmp_path: Path,
    reef_server: ReefServer,
    scenario_with_releases: Scenario,
    monkeypatch: pytest.MonkeyPatch,
) -> Rig:
    monkeypatch.setenv("REEF_TOKEN", reef_server.token)  # install asks reef serve its models
    return Rig(tmp_path, reef_server, scenario_with_releases.name)


def read_then_answer(path: Path) -> Any:
    """The scripted model: read ``path`` with opencode's read tool, then answer."""

    def chooser(route: str, body: dict[str, Any]) -> Turn | None:
        if not body.get("tools"):
            return Turn(text="a title")  # a side request (a session title)
        if any(m.get("role") == "tool" for m in body.get("messages") or []):
            return Turn(text=ANSWER)
        return Turn(text="", tool_calls=[("read", {"filePath": str(path)})])

    return chooser


def system_text(body: dict[str, Any]) -> str:
    return json.dumps([m for m in body["messages"] if m.get("role") == "system"])


def test_opencode_loads_the_merged_config_and_uninstall_restores_it(rig: Rig) -> None:
    before = snapshot(rig.target)
    rig.install("1")

    shown = rig.opencode("debug", "config")
    assert shown.returncode == 0, shown.stderr
    config = json.loads(shown.stdout)
    assert config["model"] == "reef/fake-model"  # what reef serve lists (GET /v1/models)
    assert {"reef", "ollama", "work"} <= set(config["provider"])  # the person's stay
    assert config["provider"]["reef"]["options"]["baseURL"] == rig.reef.url + "/v1"
    assert config["permission"] == {"bash": {"git *": "allow", "*": "ask"}}
    assert "summarize" in config["command"]  # commands/summarize.md
    skills = json.loads(rig.opencode("debug", "skill").stdout)
    ours = [s for s in skills if s["name"] == SKILL_NAME]
    assert ours and ours[0]["description"] == SKILL_DESCRIPTION
    assert ours[0]["location"] == str(rig.target / "skills" / SKILL_NAME / "SKILL.md")

    uninstall("opencode", rig.target)
    # opencode writes into every config dir it reads: a .gitignore, its plugin SDK (npm,
    # when it can reach the registry) and, here, the wrapper's session store. Those are
    # opencode's; everything else is as the person left it.
    theirs = (".gitignore", "package.json", "package-lock.json", "node_modules", "opencode.db")
    after = {k: v for k, v in snapshot(rig.target).items() if not k.startswith(theirs)}
    assert after == before


def test_a_wrapper_run_goes_through_reef_and_is_harvested(
    rig: Rig, fake_model: FakeModel, scenario_with_releases: Scenario
) -> None:
    rig.install("1")  # r2 is served: the records must be credited to r1, the installed one
    fake_model.fake.chooser = read_then_answer(rig.work / "notes.txt")

    done = rig.opencode("run", "--title", "why", "--", "Why", "is", "it", "red?", session="s-1")
    assert done.returncode == 0, done.stderr
    assert ANSWER in done.stdout

    calls = fake_model.inference()
    assert len(calls) == 2, [c.body.get("messages", [])[:1] for c in calls]  # no title call
    assert calls[0].body["model"] == "fake-model"
    system = system_text(calls[0].body)
    for text in (RULE_R1, SKILL_NAME, SKILL_DESCRIPTION, PERSON_RULE):
        assert json.dumps(text)[1:-1] in system, text
    assert RULE_R2 not in system
    assert "notes-5d1a" in json.dumps(calls[1].body["messages"])  # the read tool's result

    records = rig.reef.records(scenario=rig.routing.scenario)
    assert len(records) == 2 and all(r.status == 200 for r in records)
    assert {r.session_id for r in records} == {"s-1"}
    assert {r.release_id for r in records} == {1}
    assert RULE_R1 in json.dumps(records[0].request)

    sessions = rig.adapter.harvest(rig.target)
    assert len(sessions) == 1
    session = sessions[0]
    assert session.session_id.startswith("ses_")
    assert [t.role for t in session.turns] == ["user", "assistant", "tool", "assistant"]
    assert session.turns[0].text == "Why is it red?"
    assert session.turns[1].tool_calls[0].name == "read"
    assert "notes-5d1a" in session.turns[2].text and session.turns[3].text == ANSWER
    assert session.cwd == str(rig.work) and session.model == "reef/fake-model"
    assert (rig.target / "opencode.db").exists()  # the wrapper's OPENCODE_DB


def test_a_session_without_a_reef_session_id_is_recorded_under_opencodes_own(
    rig: Rig, fake_model: FakeModel
) -> None:
    rig.install("2")
    done = rig.opencode("run", "--title", "t", "--", "hello")
    assert done.returncode == 0, done.stderr
    records = rig.reef.records()
    sessions = rig.adapter.harvest(rig.target)
    assert len(sessions) == 1 and records
    assert {r.session_id for r in records} == {sessions[0].session_id}
    assert sessions[0].receipts == [r.id for r in records]


def test_headless_run_in_reefs_sandbox_reads_an_installed_skill(
    tmp_path: Path,
    fake_model: FakeModel,
    reef_server: ReefServer,
    scenario_with_releases: Scenario,
) -> None:
    """A trial's run: bwrap with only the gateway reachable; the skill the tree installs
    is readable inside it, and everything opencode keeps stays in the work dir."""
    from recipes.engine.trial import sandboxed

    work = tmp_path / "work"
    work.mkdir()
    skill = work / ".reef-agent" / "skills" / SKILL_NAME / "SKILL.md"
    fake_model.fake.chooser = read_then_answer(skill)
    adapter = OpenCodeAdapter()
    transcript = adapter.run_headless(
        tree_files(RULE_R1),
        "Why did the test start failing?",
        work,
        Gateway(reef_server.url, scenario_with_releases.name, reef_server.token, "fake-model"),
        launch=sandboxed(reef_server.server.port),
        timeout=RUN_TIMEOUT,
    )
    assert transcript.ok, transcript.stderr[-3000:]
    assert transcript.isolation == "bwrap" and ANSWER in transcript.stdout

    calls = fake_model.inference()
    assert len(calls) == 2  # the tool call and the answer: no title call
    assert RULE_R1 in system_text(calls[0].body)
    assert "git bisect start" in json.dumps(calls[1].body["messages"])  # the skill's body
    records = reef_server.records(session_id=transcript.session_id)
    assert len(records) == 2 and {r.scenario for r in records} == {scenario_with_releases.name}

    agent_dir = work / ".reef-agent"
    assert (agent_dir / "opencode.db").exists() and (agent_dir / ".xdg" / "data").is_dir()
    assert transcript.session is not None
    assert [t.role for t in transcript.session.turns] == ["user", "assistant", "tool", "assistant"]
    harvested = adapter.harvest(agent_dir)
    assert [s.session_id for s in harvested] == [transcript.session.session_id]
    assert harvested[0].receipts == [r.id for r in records]  # via the run's Reef session id


def test_a_wrong_token_is_a_failed_run_not_a_hang(
    tmp_path: Path, reef_server: ReefServer, scenario_with_releases: Scenario
) -> None:
    transcript = OpenCodeAdapter().run_headless(
        tree_files(RULE_R1),
        "hello",
        tmp_path,
        Gateway(reef_server.url, scenario_with_releases.name, "wrong-token", "fake-model"),
        timeout=RUN_TIMEOUT,
    )
    assert not transcript.ok and not transcript.timed_out
    assert "wrong Reef token" in transcript.stderr, transcript.stderr  # reef serve's 401
    assert reef_server.records() == []

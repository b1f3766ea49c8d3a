"""Claude Code end to end: the real binary (2.1.x, `-p` mode) in a temp HOME and
CLAUDE_CONFIG_DIR, through a real `reef serve` (uvicorn in a thread), to the scripted
fake model. Each claude run is bounded by a timeout; the file takes well under a minute.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapters._install import install_release, uninstall
from adapters.base import Transcript
from adapters.claude_code.adapter import ClaudeCodeAdapter
from reef_cli.core import installs
from tests.e2e import agent_rig
from tests.e2e.conftest import (
    RULE_R1,
    RULE_R2,
    RULE_R3,
    SKILL_DESCRIPTION,
    SKILL_NAME,
    FakeModel,
    ReefServer,
    Scenario,
    tree_files,
)

pytestmark = agent_rig.needs("claude", "Claude Code")
RUN_TIMEOUT = 60
CONTEXT_MARK = "Reef manages this Claude Code harness"


class Rig(agent_rig.Rig):
    """One person's machine with a Claude Code config dir."""

    adapter: ClaudeCodeAdapter

    def __init__(self, tmp: Path, reef: ReefServer, scenario: str) -> None:
        super().__init__(tmp, reef, ClaudeCodeAdapter(), "claude-config", scenario)

    def env(self) -> dict[str, str]:
        return {**super().env(), "REEF_HOME": str(self.reef.home), "REEF_TOKEN": self.reef.token}

    def claude(self, prompt: str, *args: str) -> Transcript:
        done = self.adapter.run_installed(
            prompt,
            self.work,
            self.target,
            self.routing,
            env=self.env(),
            timeout=RUN_TIMEOUT,
            extra_args=list(args),
        )
        assert done.returncode == 0, f"claude failed ({done.returncode}):\n{done.stderr}"
        return done


@pytest.fixture
def rig(
    tmp_path: Path, reef_server: ReefServer, scenario_with_releases: Scenario, monkeypatch: Any
) -> Rig:
    monkeypatch.setenv("REEF_TOKEN", reef_server.token)
    return Rig(tmp_path, reef_server, scenario_with_releases.name)


def _stream_events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def _session_start_output(stdout: str) -> dict[str, Any]:
    for event in _stream_events(stdout):
        if event.get("subtype") == "hook_response" and event.get("hook_event") == "SessionStart":
            return json.loads(event["stdout"])
    raise AssertionError(f"no SessionStart hook response in:\n{stdout[:2000]}")


def test_installed_rules_and_skills_reach_the_model_through_reef(
    rig: Rig, fake_model: FakeModel
) -> None:
    rig.install("2")

    done = rig.claude("What is the house style?")

    assert "Reef fake answer." in done.stdout
    records = rig.reef.records()
    assert len(records) == 1, [r.summary() for r in records]
    record = records[0]
    assert record.scenario == "e2e" and record.release_id == 2 and record.status == 200
    sent = json.dumps(record.request)
    # CLAUDE.md (rules), the skill listing and the SessionStart context, as Reef recorded them
    for text in (RULE_R1, RULE_R2, SKILL_NAME, SKILL_DESCRIPTION, CONTEXT_MARK):
        assert json.dumps(text)[1:-1] in sent, text
    # ... and as the model received them (translated to OpenAI chat by reef serve)
    upstream = fake_model.inference()
    assert len(upstream) == 1
    received = json.dumps(upstream[0].body)
    for text in (RULE_R2, SKILL_NAME, SKILL_DESCRIPTION):
        assert json.dumps(text)[1:-1] in received, text
    # Reef's /versions command is hidden from the model (disable-model-invocation)
    assert "- versions: Reef releases" not in received
    listing = json.dumps(f"- {SKILL_NAME}: {SKILL_DESCRIPTION}")[1:-1]
    assert listing in sent and listing in received

    # the harvested transcript links to the record by Claude Code's session id
    assert done.session is not None
    assert record.session_id == done.session.session_id
    sessions = rig.adapter.harvest(rig.target)
    assert [s.session_id for s in sessions] == [done.session.session_id]
    session = sessions[0]
    assert session.receipts == [record.id]
    assert [t.role for t in session.turns] == ["user", "assistant"]
    assert session.turns[0].text == "What is the house style?"
    assert session.turns[1].text == "Reef fake answer."
    assert session.cwd == str(rig.work.resolve())
    assert session.model and session.started_at and session.ended_at


def test_versions_commands_answer_without_any_model_call(
    rig: Rig, fake_model: FakeModel, scenario_with_releases: Scenario
) -> None:
    rig.install("1")
    before_upstream = len(fake_model.log)

    listing = rig.claude("/versions").stdout
    assert "installed r1, latest r2" in listing
    assert "quote file names before editing" in listing  # r2's reason
    assert "← available" in listing

    shown = rig.claude("/versions 2").stdout
    assert "why: quote file names before editing" in shown
    assert "changes from r1 (installed):" in shown
    assert f"+{RULE_R2}" in shown  # the diff line
    assert "/versions 2 install" in shown
    assert "passed credential-scan" in shown  # the gate's checks and numbers

    installed = rig.claude("/versions 2 install").stdout
    assert "Installed r2" in installed
    assert rig.adapter.installed(rig.target)["release"] == 2  # type: ignore[index]
    assert RULE_R2 in (rig.target / "CLAUDE.md").read_text()
    assert installs.installed_release("e2e") == 2

    again = rig.claude("/versions 9").stdout
    assert "release r9 does not exist" in again

    # zero model requests: nothing reached the fake model, nothing was recorded
    assert len(fake_model.log) == before_upstream
    assert rig.reef.records() == []


def test_evolve_files_an_ask_without_a_model_call(
    rig: Rig, fake_model: FakeModel, scenario_with_releases: Scenario, reef_home: Path
) -> None:
    """``/evolve <ask>`` in the real binary (issue 27): Reef's hook files the ask with
    Claude Code's session and answers it; nothing reaches the model."""
    rig.install("1")
    before_upstream = len(fake_model.log)
    done = rig.claude("/evolve always run the tests first").stdout
    [filed] = sorted((reef_home / "asks").glob("*.json"))
    assert str(filed) in done and "reef-claude evolve --filed" in done
    data = json.loads(filed.read_text())
    assert (data["ask"], data["scenario"], data["agent"]) == (
        "always run the tests first",
        "e2e",
        "claude-code",
    )
    assert data["installed_release"] == 1 and data["reef_session"]
    assert len(fake_model.log) == before_upstream and rig.reef.records() == []


def test_next_session_gets_the_update_notice(
    rig: Rig, fake_model: FakeModel, scenario_with_releases: Scenario
) -> None:
    rig.install("2")
    stream = ["--output-format", "stream-json", "--verbose"]

    quiet = _session_start_output(rig.claude("hi", *stream).stdout)
    assert "systemMessage" not in quiet
    assert CONTEXT_MARK in quiet["hookSpecificOutput"]["additionalContext"]

    scenario_with_releases.publish(tree_files(f"{RULE_R1}\n{RULE_R2}\n{RULE_R3}"), "small commits")

    out = _session_start_output(rig.claude("hi again", *stream).stdout)
    notice = "Reef r2 installed — r3 available (/versions 3 install)"
    assert out["systemMessage"] == notice
    # the model is told too (SessionStart additionalContext)
    assert notice in json.dumps(rig.reef.records()[-1].request, ensure_ascii=False)


def test_person_files_survive_install_use_and_uninstall(rig: Rig, fake_model: FakeModel) -> None:
    target = rig.target
    (target / "skills" / "my-own-skill").mkdir(parents=True)
    (target / "skills" / "my-own-skill" / "SKILL.md").write_text(
        "---\nname: my-own-skill\ndescription: Mine (person-skill-5e1f).\n---\nbody\n"
    )
    own_log = rig.home / "own-hook.log"
    claude_md = b"# My notes\n\nAlways be kind (person-rule-0b7e).\n"
    settings = {
        "model": "claude-sonnet-4-5",
        "hooks": {
            "UserPromptSubmit": [{"hooks": [{"type": "command", "command": f"cat >> {own_log}"}]}]
        },
    }
    settings_bytes = (json.dumps(settings, indent=4) + "\n").encode()
    (target / "CLAUDE.md").write_bytes(claude_md)
    (target / "settings.json").write_bytes(settings_bytes)

    rig.install("1")
    text = (target / "CLAUDE.md").read_text()
    assert text.startswith(claude_md.decode()) and RULE_R1 in text
    merged = json.loads((target / "settings.json").read_text())
    assert merged["model"] == "claude-sonnet-4-5"
    commands = [h["command"] for g in merged["hooks"]["UserPromptSubmit"] for h in g["hooks"]]
    assert commands[0] == f"cat >> {own_log}" and " hook claude-code " in commands[1]

    rig.claude("hello")
    sent = json.dumps(rig.reef.records()[-1].request)
    assert "person-rule-0b7e" in sent and RULE_R1 in sent  # both CLAUDE.md parts
    assert "person-skill-5e1f" in sent and SKILL_DESCRIPTION in sent  # both skills
    blocked = rig.claude("/versions").stdout
    assert "installed r1" in blocked
    prompts = [json.loads(line)["prompt"] for line in own_log.read_text().splitlines()]
    assert prompts == ["hello", "/versions"]  # the person's hook ran alongside Reef's

    uninstall("claude-code", target)
    assert (target / "CLAUDE.md").read_bytes() == claude_md
    assert (target / "settings.json").read_bytes() == settings_bytes
    assert (target / "skills" / "my-own-skill" / "SKILL.md").exists()
    assert not (target / "skills" / SKILL_NAME).exists()
    assert not (target / "commands").exists()
    assert not (target / ".reef").exists()
    assert rig.adapter.installed(target) is None


def test_project_dot_claude_target(rig: Rig, fake_model: FakeModel, monkeypatch: Any) -> None:
    """A project's .claude/: found from the working directory, CLAUDE_CONFIG_DIR untouched."""
    project_target = rig.work / ".claude"
    install_release("claude-code", "e2e", rig.routing, "1", project_target)
    env = {**rig.env(), "CLAUDE_CONFIG_DIR": str(rig.target)}  # the person's own config dir
    done = rig.adapter.run_installed(
        "hello", rig.work, project_target, rig.routing, env=env, timeout=RUN_TIMEOUT
    )
    assert done.returncode == 0, done.stderr
    sent = json.dumps(rig.reef.records()[-1].request)
    assert RULE_R1 in sent and SKILL_DESCRIPTION in sent
    listing = rig.adapter.run_installed(
        "/versions", rig.work, project_target, rig.routing, env=env, timeout=RUN_TIMEOUT
    )
    assert "installed r1, latest r2" in listing.stdout
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(rig.target))
    sessions = rig.adapter.harvest(project_target)
    assert [s.session_id for s in sessions] == [done.session.session_id]  # type: ignore[union-attr]
    assert sessions[0].receipts == [r.id for r in rig.reef.records()]


def test_versions_work_after_the_recorded_reef_moved(
    rig: Rig, fake_model: FakeModel, tmp_path: Path, monkeypatch: Any
) -> None:
    """The real Claude Code runs the hooks: with the recorded venv gone, `reef` is found on
    PATH; with none anywhere, /versions is answered with what is wrong. No model call."""
    from reef_cli.core import launcher

    real, old = agent_rig.moved_reef(tmp_path)
    with monkeypatch.context() as patch:
        patch.setattr(launcher, "current_cli", lambda: str(old))
        rig.install("1")
    old.parent.parent.rename(tmp_path / "moved-venv")
    monkeypatch.setattr(launcher, "agent_env", dict)  # not via a wrapper: no $REEF_CLI
    bare = agent_rig.path_without_reef()
    base_env = rig.env

    monkeypatch.setattr(rig, "env", lambda: {**base_env(), "PATH": f"{real.parent}:{bare}"})
    assert "installed r1, latest r2" in rig.claude("/versions").stdout

    monkeypatch.setattr(rig, "env", lambda: {**base_env(), "PATH": bare})
    missing = rig.claude("/versions").stdout
    assert "Reef: cannot find the `reef` command" in missing and str(old) in missing
    assert len(fake_model.inference()) == 0 and rig.reef.records() == []


def test_reload_brings_a_running_session_onto_the_new_install(
    rig: Rig, fake_model: FakeModel, scenario_with_releases: Scenario
) -> None:
    """One session (prompts streamed into one `claude -p`): after ``/versions 2 install``
    the model still gets r1's CLAUDE.md; ``/reload`` hands it r2 (Reef's hook, as
    additionalContext), and later turns keep it. The hook itself calls no model."""
    from adapters._process import run_group

    rig.install("1")
    prompts = ["/versions 2 install", "What is the house style?", "/reload", "And now?"]
    stdin = "".join(
        json.dumps({"type": "user", "message": {"role": "user", "content": p}}) + "\n"
        for p in prompts
    )
    stream = ["--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
    argv, extra = rig.adapter.wrapper(rig.target, rig.routing, ["-p", *stream])
    done = run_group(argv, rig.work, {**rig.env(), **extra}, RUN_TIMEOUT, stdin)
    assert done.returncode == 0, done.stderr

    said = json.dumps(_stream_events(done.stdout), ensure_ascii=False)
    assert "or type /reload to load it into this one" in said
    assert 'Reef: loaded r2 of \\"e2e\\" into this session (it had r1).' in said
    calls = [json.dumps(c.body) for c in fake_model.inference()]
    assert len(calls) == 3, said[:3000]  # the install was answered by the hook alone
    assert RULE_R1 in calls[0] and RULE_R2 not in calls[0]  # CLAUDE.md as read at start
    loaded = "Reef /reload: release r2 of Reef scenario"
    assert loaded in calls[1] and RULE_R2 in calls[1]
    assert "The user typed /reload." in calls[1]  # Reef's command text went with it
    assert loaded in calls[2] and RULE_R2 in calls[2]  # and stays in the conversation
    # The wrapper's x-reef-release-id is fixed when claude starts: records stay on r1.
    assert [r.release_id for r in rig.reef.records()] == [1, 1, 1]

    # A new session read CLAUDE.md itself: /reload says so, with no model call.
    fresh = rig.claude("/reload").stdout
    assert 'r2 of "e2e" is installed, the release this session already follows' in fresh
    assert len(fake_model.inference()) == 3

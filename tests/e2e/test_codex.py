"""Codex CLI end to end: the real binary (0.171, ``codex exec`` and the TUI on a pty) in a
temp HOME and CODEX_HOME, through a real `reef serve` (its Responses API, translated to
chat) to the scripted fake model. What every adapter must do is in
tests/e2e/test_adapter_contract.py; this file checks what is Codex's own: tool calls
through the Responses translation, Codex's sandbox with and without Reef's, the hooks
(``$versions`` answered with no model call, the update notice) and the person's files.
Each codex run is bounded by a timeout; a run takes about a second.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path
from typing import Any

import pytest

from adapters._install import uninstall
from adapters.base import Gateway
from adapters.codex.adapter import CodexAdapter
from reef_cli.core import installs
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

pytestmark = agent_rig.needs("codex", "the Codex CLI")
RUN_TIMEOUT = 60
CONTEXT_MARK = "Reef manages this Codex harness"
PERSON_CONFIG = b"""# My Codex settings (person-config-c0de)
model = "gpt-5-codex"
approval_policy = "on-request"  # ask me first

[model_providers.my-ollama]  # not `ollama`: Codex refuses to override a built-in id
name = "My Ollama"
base_url = "http://127.0.0.1:11434/v1"
"""
PERSON_AGENTS = b"# My notes\n\nAlways be kind (person-rule-0b7e).\n"
WRITE = "printf 'written by codex\\n' > out.txt && cat out.txt"


def gateway(reef: ReefServer) -> Gateway:
    return Gateway(reef.url, "e2e", reef.token, model="fake-model")


def shown(done: Any) -> str:
    return f"rc={done.returncode}\nstdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"


class Rig(agent_rig.Rig):
    """One person's machine with a CODEX_HOME."""

    def __init__(self, tmp: Path, reef: ReefServer) -> None:
        super().__init__(tmp, reef, CodexAdapter(), "codex-home", "e2e")

    def env(self) -> dict[str, str]:
        # Codex links its helpers only outside the temp dir
        return {**super().env(), "TMPDIR": str(self.home)}

    def command(self, argv: list[str]) -> tuple[list[str], dict[str, str]]:
        """What `reef-codex ARGV` runs: the wrapper's argv and environment."""
        command, extra = self.adapter.wrapper(self.target, self.routing, argv)
        return command, {**self.env(), **extra}

    def codex(self, prompt: str) -> tuple[subprocess.CompletedProcess[str], str]:
        command, env = self.command(["exec", "--skip-git-repo-check", prompt])
        done = agent_rig.run(command, self.work, env, RUN_TIMEOUT)
        assert done.returncode == 0, shown(done)
        return done, env["REEF_SESSION_ID"]


@pytest.fixture
def rig(
    tmp_path: Path, reef_server: ReefServer, scenario_with_releases: Scenario, monkeypatch: Any
) -> Rig:
    monkeypatch.setenv("REEF_TOKEN", reef_server.token)  # as the wrapper's prepare() does
    return Rig(tmp_path, reef_server)


# ---------------------------------------------------------------- headless runs


def test_headless_run_with_a_tool_call_is_recorded_and_harvested(
    tmp_path: Path, fake_model: FakeModel, reef_server: ReefServer
) -> None:
    fake_model.push(
        Turn(text="Writing it.", tool_calls=[("exec_command", {"cmd": WRITE})]),
        Turn(text="Done: out.txt holds the line."),
    )
    work = tmp_path / "work"
    work.mkdir()
    files = tree_files(f"{RULE_R1}\n{RULE_R2}")

    done = CodexAdapter().run_headless(
        files, "Write out.txt", work, gateway(reef_server), timeout=RUN_TIMEOUT
    )

    assert done.ok, shown(done)
    assert "Done: out.txt holds the line." in done.stdout
    # Codex's own sandbox (workspace-write) let the command write in the work dir
    assert (work / "out.txt").read_text() == "written by codex\n"
    records = reef_server.records()
    assert len(records) == 2, [r.summary() for r in records]
    assert {r.scenario for r in records} == {"e2e"}
    assert {r.session_id for r in records} == {done.session_id}
    assert {r.client_dialect for r in records} == {"responses"}
    assert all(r.status == 200 for r in records)
    sent = json.dumps(records[0].request)
    for text in (RULE_R1, RULE_R2, SKILL_NAME, SKILL_DESCRIPTION):
        assert json.dumps(text)[1:-1] in sent, text
    assert "Reef releases of" not in sent  # $versions is the person's, not the model's
    # the model got the rules through Reef's Responses -> chat translation, and the
    # tool's output came back to it as a chat tool message
    upstream = fake_model.inference()
    assert [e.path for e in upstream] == ["/v1/chat/completions"] * 2
    assert RULE_R2 in json.dumps(upstream[0].body)
    tool_messages = [m for m in upstream[1].body["messages"] if m.get("role") == "tool"]
    assert tool_messages and "written by codex" in json.dumps(tool_messages)

    session = done.session
    assert session is not None and session.cwd == str(work)
    assert [t.role for t in session.turns] == ["user", "assistant", "tool", "assistant"]
    assert session.turns[0].text == "Write out.txt"
    assert session.turns[1].tool_calls[0].name == "exec_command"
    assert session.turns[1].tool_calls[0].arguments == {"cmd": WRITE}
    assert "written by codex" in session.turns[2].text
    harvested = CodexAdapter().harvest(work / ".reef-agent")
    assert [s.session_id for s in harvested] == [session.session_id]
    assert harvested[0].receipts == [r.id for r in records]
    assert harvested[0].reef_session_id == done.session_id  # type: ignore[attr-defined]
    assert harvested[0].model == "fake-model" and harvested[0].started_at


def test_headless_run_in_reefs_sandbox_writes_its_work_dir(
    tmp_path: Path, fake_model: FakeModel, reef_server: ReefServer
) -> None:
    """Under Reef's bwrap sandbox (``recipes.engine.trial.sandboxed``) Codex's own sandbox is off:
    the model's command still writes the work dir, and only `reef serve` is reached."""
    from recipes.engine.trial import sandboxed

    fake_model.push(
        Turn(text="", tool_calls=[("exec_command", {"cmd": WRITE})]), Turn(text="Written.")
    )
    work = tmp_path / "work"
    work.mkdir()
    done = CodexAdapter().run_headless(
        tree_files(RULE_R1),
        "Write out.txt",
        work,
        gateway(reef_server),
        launch=sandboxed(reef_server.server.port),
        timeout=RUN_TIMEOUT,
    )
    assert done.ok, shown(done)
    assert done.isolation == "bwrap"
    assert (work / "out.txt").read_text() == "written by codex\n"
    records = reef_server.records()
    assert len(records) == 2 and {r.session_id for r in records} == {done.session_id}
    assert done.session is not None and len(done.session.turns) == 4


# ---------------------------------------------------------------- the person's Codex


def test_installed_release_hooks_and_the_persons_files(rig: Rig, fake_model: FakeModel) -> None:
    (rig.target / "config.toml").write_bytes(PERSON_CONFIG)
    (rig.target / "AGENTS.md").write_bytes(PERSON_AGENTS)
    own_skill = rig.target / "skills" / "my-own-skill" / "SKILL.md"
    own_skill.parent.mkdir(parents=True)
    own_skill.write_text("---\nname: my-own-skill\ndescription: Mine (person-skill-5e1f).\n---\n")
    rig.install("1")
    assert (rig.target / "config.toml").read_bytes() == PERSON_CONFIG

    done, session = rig.codex("What is the house style?")
    assert "Reef fake answer." in done.stdout
    (record,) = rig.reef.records()
    assert record.scenario == "e2e" and record.session_id == session
    assert record.release_id == 1  # x-reef-release-id from the profile
    sent = json.dumps(record.request)
    for text in ("person-rule-0b7e", RULE_R1, "person-skill-5e1f", SKILL_DESCRIPTION):
        assert json.dumps(text)[1:-1] in sent, text
    # the SessionStart hook ran (trusted by the profile) and told the model about Reef
    assert CONTEXT_MARK in sent
    # Codex's own session header is not Reef's; the request body names Codex's session
    sessions = rig.adapter.harvest(rig.target)
    assert [s.receipts for s in sessions] == [[record.id]]
    assert record.request["prompt_cache_key"] == sessions[0].session_id

    # $versions is answered by Reef's UserPromptSubmit hook: no model call at all
    blocked, _ = rig.codex("$versions")
    assert "UserPromptSubmit Blocked" in blocked.stderr, shown(blocked)
    assert len(fake_model.inference()) == 1 and len(rig.reef.records()) == 1

    uninstall("codex", rig.target)
    assert (rig.target / "config.toml").read_bytes() == PERSON_CONFIG
    assert (rig.target / "AGENTS.md").read_bytes() == PERSON_AGENTS
    assert own_skill.exists() and not (rig.target / "skills" / SKILL_NAME).exists()
    assert not (rig.target / "reef.config.toml").exists()
    assert not (rig.target / ".reef").exists()


def test_versions_is_blocked_even_when_reef_is_gone(
    rig: Rig, fake_model: FakeModel, tmp_path: Path, monkeypatch: Any
) -> None:
    """The hook's shell fallback, run by the real Codex: with no `reef` anywhere,
    ``$versions`` is still blocked (the person sees why) and never reaches the model."""
    from reef_cli.core import launcher

    monkeypatch.setattr(launcher, "current_cli", lambda: str(tmp_path / "gone" / "reef"))
    rig.install("1")
    monkeypatch.setenv("PATH", agent_rig.path_without_reef())
    blocked, _ = rig.codex("$versions")
    assert "UserPromptSubmit Blocked" in blocked.stderr, shown(blocked)
    assert fake_model.inference() == [] and rig.reef.records() == []


# ---------------------------------------------------------------- the TUI, as a person


class Screen:
    """The Codex TUI on a pseudo-terminal: type, then read what it drew (escapes removed)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.master, slave = pty.openpty()
        # a real terminal's size: with none (0x0) the TUI draws one character a line
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        os.set_blocking(self.master, False)
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env={**env, "TERM": "xterm-256color"},
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self.raw = b""

    def pump(self, seconds: float, until: str | None = None) -> str:
        end = time.time() + seconds
        while time.time() < end and not (until and until in self.text()):
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if not ready:
                continue
            try:
                data = os.read(self.master, 65536)
            except OSError:
                break
            self.raw += data
            if b"\x1b[6n" in data:  # the TUI asks where the cursor is
                os.write(self.master, b"\x1b[1;1R")
        return self.text()

    def type(self, text: str) -> None:
        for char in text:
            os.write(self.master, char.encode())
            time.sleep(0.02)

    def text(self) -> str:
        plain = re.sub(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]", b"", self.raw)
        plain = re.sub(rb"\x1b\][^\x07\x1b]*(\x07|\x1b\\)", b"", plain)
        plain = re.sub(rb"\x1b.", b"", plain)
        return re.sub(r"\s+", " ", plain.decode("utf-8", "replace"))

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        os.close(self.master)


def test_versions_in_the_tui_answers_without_a_model_call(rig: Rig, fake_model: FakeModel) -> None:
    rig.install("1")
    command, env = rig.command(["--no-alt-screen"])
    screen = Screen(command, env, rig.work)
    try:
        screen.pump(20, until="Ask Codex")
        screen.type("$versions")
        screen.pump(1.5)
        screen.type("\r")  # takes the skill from the $ popup
        screen.pump(1.0)
        screen.type("\r")  # sends the prompt
        text = screen.pump(20, until="$versions N install installs it")  # the last line
        assert "Blocked by hook" in text, text[-3000:]
        assert 'Reef scenario "e2e": installed r1, latest r2' in text, text[-3000:]
        assert "quote file names before editing" in text  # r2's reason
        # the SessionStart hook's notice
        assert "Reef r1 installed — r2 available ($versions 2 install)" in text

        screen.type("$versions 2 install")
        screen.pump(1.5)
        screen.type("\r")
        screen.pump(1.0)
        screen.type("\r")
        text = screen.pump(30, until="start a new session to use it")
        assert 'Installed r2 of "e2e"' in text, text[-3000:]
    finally:
        screen.close()
    assert rig.adapter.installed(rig.target)["release"] == 2  # type: ignore[index]
    assert RULE_R2 in (rig.target / "AGENTS.md").read_text()
    assert installs.installed_release("e2e") == 2
    assert fake_model.inference() == [] and rig.reef.records() == []

"""The real pi (1.6 and 0.73) through a real `reef serve` to the scripted fake model.

Each pi run gets a temporary HOME and agent dir, has its network self-checks off
(PI_OFFLINE, PI_SKIP_VERSION_CHECK) and a timeout. One test types into pi's own TUI,
run in a detached tmux session (skipped where tmux is missing).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from adapters._install import install_release, uninstall
from adapters.base import Routing
from adapters.pi.adapter import PiAdapter, PiSession
from adapters.pi.headless import QUIET_ENV
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
from tests.fakes.upstream import Turn

TOOLS = [
    pytest.param(name, marks=agent_rig.needs(name, f"`{name}`"), id=name)
    for name in ("pi", "pi-0.73")
]
RUN_TIMEOUT = 90

PERSON_AGENTS = "# My notes\n\nI like tabs.\n"
PERSON_MODELS = (
    '{\n  "providers": {\n    "ollama": {"baseUrl": "http://127.0.0.1:11434/v1",'
    ' "api": "openai-completions", "apiKey": "ollama", "models": [{"id": "qwen"}]}\n  }\n}\n'
)


@pytest.fixture
def sandbox(tmp_path: Path) -> dict[str, Path]:
    home, agent, work = tmp_path / "home", tmp_path / "agent", tmp_path / "work"
    for folder in (home, agent, work):
        folder.mkdir()
    (agent / "AGENTS.md").write_text(PERSON_AGENTS)
    (agent / "models.json").write_text(PERSON_MODELS)
    return {"home": home, "agent": agent, "work": work}


def _env(sandbox: dict[str, Path], reef: ReefServer) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(sandbox["home"]),
        "REEF_HOME": os.environ["REEF_HOME"],
        "REEF_TOKEN": reef.token,
        **QUIET_ENV,
    }


def _pi(
    adapter: PiAdapter,
    sandbox: dict[str, Path],
    reef: ReefServer,
    routing: Routing,
    *args: str,
) -> subprocess.CompletedProcess[str]:
    argv, extra = adapter.wrapper(sandbox["agent"], routing, list(args))
    return agent_rig.run(argv, sandbox["work"], {**_env(sandbox, reef), **extra}, RUN_TIMEOUT)


@pytest.mark.parametrize("tool", TOOLS)
def test_session_goes_through_reef_and_harvests(
    tool: str,
    sandbox: dict[str, Path],
    fake_model: FakeModel,
    reef_server: ReefServer,
    scenario_with_releases: Scenario,
) -> None:
    adapter = PiAdapter(tool=tool)
    routing = Routing(base_url=reef_server.url, scenario=scenario_with_releases.name)
    os.environ["REEF_TOKEN"] = reef_server.token  # install asks reef serve for its models
    try:
        install_release("pi", routing.scenario, routing, "1", sandbox["agent"])
    finally:
        del os.environ["REEF_TOKEN"]
    # The person's files keep their content; Reef's parts are added.
    agents = (sandbox["agent"] / "AGENTS.md").read_text()
    assert agents.startswith(PERSON_AGENTS) and RULE_R1 in agents and RULE_R2 not in agents
    models = json.loads((sandbox["agent"] / "models.json").read_text())
    assert models["providers"]["ollama"]["models"] == [{"id": "qwen"}]
    assert [m["id"] for m in models["providers"]["reef"]["models"]] == ["fake-model"]

    skill_md = sandbox["agent"] / "skills" / SKILL_NAME / "SKILL.md"
    fake_model.push(Turn(text="", tool_calls=[("read", {"path": str(skill_md)})]))
    fake_model.push(Turn(text="Bisect it first."))
    transcript = adapter.run_installed(
        "Why did the test start failing?",
        sandbox["work"],
        sandbox["agent"],
        routing,
        env=_env(sandbox, reef_server),
        timeout=RUN_TIMEOUT,
    )
    assert transcript.returncode == 0, transcript.stderr
    assert "Bisect it first." in transcript.stdout

    # What the model saw: the installed rule and the skill's name and description.
    calls = fake_model.inference()
    assert len(calls) == 2
    system = json.dumps(calls[0].body["messages"][0])
    assert RULE_R1 in system and SKILL_NAME in system and SKILL_DESCRIPTION in system
    assert calls[0].body["model"] == "fake-model"

    # What Reef recorded: the same request, under the wrapper's session id.
    records = reef_server.records(scenario=routing.scenario)
    assert len(records) == 2
    assert RULE_R1 in json.dumps(records[0].request)
    assert SKILL_DESCRIPTION in json.dumps(records[0].request)
    session = transcript.session
    assert isinstance(session, PiSession)
    assert session.reef_session_id and {r.session_id for r in records} == {session.reef_session_id}
    # Credited to the installed release: pi sent models.json's x-reef-release-id (r2 is served)
    assert all(r.release_id == 1 for r in records)
    assert models["providers"]["reef"]["headers"]["x-reef-release-id"] == "!echo 1"

    # The transcript pi wrote, parsed: turns, the tool call, the skill, the receipts.
    assert [t.role for t in session.turns] == ["user", "assistant", "tool", "assistant"]
    assert session.turns[1].tool_calls[0].name == "read"
    assert session.turns[-1].text == "Bisect it first."
    assert session.skills_used == [SKILL_NAME]
    assert session.model == "reef/fake-model"
    assert session.cwd == str(sandbox["work"])
    assert session.receipts == [r.id for r in records]
    harvested = adapter.harvest(sandbox["agent"])
    assert [s.session_id for s in harvested] == [session.session_id]

    # Uninstall gives the person's files back byte for byte.
    uninstall("pi", sandbox["agent"])
    assert (sandbox["agent"] / "AGENTS.md").read_text() == PERSON_AGENTS
    assert (sandbox["agent"] / "models.json").read_text() == PERSON_MODELS
    assert not (sandbox["agent"] / "extensions" / "reef").exists()
    assert not skill_md.exists() and not (sandbox["agent"] / ".reef").exists()


@pytest.mark.parametrize("tool", TOOLS)
def test_versions_answer_locally_and_notice_updates(
    tool: str,
    sandbox: dict[str, Path],
    fake_model: FakeModel,
    reef_server: ReefServer,
    scenario_with_releases: Scenario,
) -> None:
    adapter = PiAdapter(tool=tool, models=["fake-model"])
    routing = Routing(base_url=reef_server.url, scenario=scenario_with_releases.name)
    install_release("pi", routing.scenario, routing, "1", sandbox["agent"])

    listing = _pi(adapter, sandbox, reef_server, routing, "-p", "/versions")
    assert listing.returncode == 0, listing.stderr
    assert "installed r1, served r2" in listing.stdout
    assert "quote file names before editing" in listing.stdout
    assert "Reef r1 installed — r2 available (/versions 2 install)" in listing.stderr

    shown = _pi(adapter, sandbox, reef_server, routing, "-p", "/versions 2")
    assert shown.returncode == 0, shown.stderr
    assert "Why: quote file names before editing" in shown.stdout
    assert f"+{RULE_R2}" in shown.stdout  # what changed: the diff against r1
    assert re.search(r"passed\s+credential-scan", shown.stdout)  # the gate's checks

    installed = _pi(adapter, sandbox, reef_server, routing, "-p", "/versions 2 install")
    assert installed.returncode == 0, installed.stderr
    assert "installed r2 of e2e" in installed.stdout
    assert adapter.installed(sandbox["agent"])["release"] == 2  # type: ignore[index]
    assert RULE_R2 in (sandbox["agent"] / "AGENTS.md").read_text()

    # None of that asked the model anything.
    assert fake_model.inference() == []
    assert reef_server.records() == []

    # A new release is published: the next session says so.
    scenario_with_releases.publish(tree_files(f"{RULE_R1}\n{RULE_R2}\n{RULE_R3}"), "commits")
    fake_model.push(Turn(text="ok"))
    answered = _pi(adapter, sandbox, reef_server, routing, "-p", "hello")
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.strip() == "ok"  # the notice stays out of the answer
    assert "Reef r2 installed — r3 available (/versions 3 install)" in answered.stderr
    assert RULE_R2 in json.dumps(fake_model.inference()[0].body)


@pytest.mark.parametrize("tool", TOOLS)
def test_evolve_files_an_ask_without_a_model_call(
    tool: str,
    sandbox: dict[str, Path],
    fake_model: FakeModel,
    reef_server: ReefServer,
    scenario_with_releases: Scenario,
    reef_home: Path,
) -> None:
    adapter = PiAdapter(tool=tool, models=["fake-model"])
    routing = Routing(base_url=reef_server.url, scenario=scenario_with_releases.name)
    install_release("pi", routing.scenario, routing, "2", sandbox["agent"])
    done = _pi(adapter, sandbox, reef_server, routing, "-p", "/evolve always run the tests first")
    assert done.returncode == 0, done.stderr
    asks = list((reef_home / "asks").glob("*.json"))
    assert len(asks) == 1 and str(asks[0]) in done.stdout
    ask = json.loads(asks[0].read_text())
    assert ask["ask"] == "always run the tests first"
    assert ask["scenario"] == "e2e" and ask["installed_release"] == 2 and ask["agent"] == "pi"
    assert fake_model.inference() == []


@pytest.mark.parametrize("tool", TOOLS)
def test_wrong_token_is_a_clear_failure(
    tool: str,
    sandbox: dict[str, Path],
    fake_model: FakeModel,
    reef_server: ReefServer,
    scenario_with_releases: Scenario,
) -> None:
    adapter = PiAdapter(tool=tool, models=["fake-model"])
    routing = Routing(base_url=reef_server.url, scenario=scenario_with_releases.name)
    install_release("pi", routing.scenario, routing, "2", sandbox["agent"])
    env = {**_env(sandbox, reef_server), "REEF_TOKEN": "wrong"}
    transcript = adapter.run_installed("hi", sandbox["work"], sandbox["agent"], routing, env=env)
    assert transcript.returncode != 0
    assert "Reef token" in transcript.stderr
    assert fake_model.inference() == []


@pytest.mark.parametrize("tool", TOOLS)
def test_versions_find_reef_at_run_time_when_the_recorded_one_moved(
    tool: str,
    sandbox: dict[str, Path],
    fake_model: FakeModel,
    reef_server: ReefServer,
    scenario_with_releases: Scenario,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The venv the install recorded moved: the extension uses `reef` from PATH (or
    $REEF_CLI) and says so; with none at all it says that. Never a model call."""
    from reef_cli.core import launcher

    real, old = agent_rig.moved_reef(tmp_path)
    adapter = PiAdapter(tool=tool, models=["fake-model"])
    routing = Routing(base_url=reef_server.url, scenario=scenario_with_releases.name)
    with monkeypatch.context() as patch:
        patch.setattr(launcher, "current_cli", lambda: str(old))
        install_release("pi", routing.scenario, routing, "1", sandbox["agent"])
    old.parent.parent.rename(tmp_path / "moved-venv")

    bare = agent_rig.path_without_reef()

    def pi(path: str) -> subprocess.CompletedProcess[str]:
        argv, extra = adapter.wrapper(sandbox["agent"], routing, ["-p", "/versions"])
        extra.pop(launcher.CLI_ENV)  # not started by a wrapper: nothing says where reef is
        env = {**_env(sandbox, reef_server), **extra, "PATH": path}
        return agent_rig.run(argv, sandbox["work"], env, RUN_TIMEOUT)

    found = pi(f"{real.parent}{os.pathsep}{bare}")
    assert found.returncode == 0, found.stderr
    assert "installed r1, served r2" in found.stdout
    assert f"the reef command recorded at install ({old}) is gone; using {real}" in found.stderr

    missing = pi(bare)
    assert "cannot find the reef command" in missing.stdout + missing.stderr
    assert "installed r1" not in missing.stdout
    assert fake_model.inference() == [] and reef_server.records() == []

    from tests.cli.helpers import reef_json

    [row] = [r for r in reef_json("doctor") if r["name"] == "install pi"]
    assert row["status"] == "warn" and "stale" in row["detail"] and str(old) in row["detail"]


@pytest.mark.parametrize("tool", TOOLS[:1])
def test_versions_lists_a_proposal_waiting_for_review(
    tool: str,
    sandbox: dict[str, Path],
    fake_model: FakeModel,
    reef_server: ReefServer,
    scenario_with_releases: Scenario,
) -> None:
    from reef_cli.core.publishing import publish_files

    adapter = PiAdapter(tool=tool, models=["fake-model"])
    routing = Routing(base_url=reef_server.url, scenario=scenario_with_releases.name)
    install_release("pi", routing.scenario, routing, "1", sandbox["agent"])
    publish_files(
        scenario_with_releases.name,
        tree_files(f"{RULE_R1}\n{RULE_R3}"),
        reason="a live-loop proposal",
        hold="review",
    )
    listing = _pi(adapter, sandbox, reef_server, routing, "-p", "/versions")
    assert listing.returncode == 0, listing.stderr
    assert "Proposals waiting for review:" in listing.stdout
    assert "r3    held for review: a live-loop proposal" in listing.stdout
    assert "installed r1, served r2" in listing.stdout  # a proposal is not served
    assert fake_model.inference() == []


# ----------------------------------------------------------------- pi's own TUI, in tmux

needs_tmux = pytest.mark.skipif(
    shutil.which("tmux") is None,
    reason="tmux is not installed (apt-get install tmux): the in-agent test drives pi's TUI in it",
)
TUI_START = 90  # pi's first screen, its extensions loaded and Reef's status shown
TUI_STEP = 45  # one command or one model turn


class Pane:
    """The real pi TUI in a detached tmux session on a private socket under the test's tmp
    dir (a person's tmux server is never touched): type into it, read the screen back."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket

    def tmux(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(
            ["tmux", "-S", str(self.socket), *args],
            capture_output=True,
            text=True,
            timeout=15,
            env={"PATH": os.environ["PATH"], "HOME": str(self.socket.parent), "LANG": "C.UTF-8"},
        )
        assert done.returncode == 0 or not check, f"tmux {args[0]}: {done.stderr}"
        return done.stdout

    def start(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        """Run ``argv`` with exactly ``env`` in a 200x50 pane, kept on screen if it exits."""
        command = ["env", "-i", *(f"{k}={v}" for k, v in env.items()), *argv]
        session = ["new-session", "-d", "-x", "200", "-y", "50", "-c", str(cwd), *command]
        self.tmux("-f", "/dev/null", *session, ";", "set-option", "remain-on-exit", "on")

    def screen(self) -> str:
        """The pane with its scrollback, wrapped lines joined."""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", check=False)

    def flat(self) -> str:
        """The screen without whitespace: pi wraps long lines itself."""
        return "".join(self.screen().split())

    def wait(self, what: str, ready: Callable[[], bool], timeout: float = TUI_STEP) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} within {timeout:g}s; the pane:\n{self.screen()}")
            time.sleep(0.2)

    def shows(self, text: str, timeout: float = TUI_STEP) -> None:
        flat = "".join(text.split())
        self.wait(f"no {text!r} on screen", lambda: flat in self.flat(), timeout)

    def submit(self, text: str) -> None:
        """Type ``text`` into pi's editor, wait until it is shown, press Enter."""
        flat = "".join(text.split())
        before = self.flat().count(flat)
        self.tmux("send-keys", "-l", text)
        self.wait(f"{text!r} not typed", lambda: self.flat().count(flat) > before)
        self.tmux("send-keys", "Enter")

    def kill(self) -> None:
        self.tmux("kill-server", check=False)


def _answered(fake_model: FakeModel, pane: Pane, count: int, text: str) -> dict[str, Any]:
    """The ``count``-th model request, once pi has shown its answer ``text``."""
    pane.wait(f"no model request #{count}", lambda: len(fake_model.inference()) >= count)
    pane.shows(text)
    calls = fake_model.inference()
    assert len(calls) == count, pane.screen()
    return calls[-1].body


@needs_tmux
@pytest.mark.parametrize("tool", TOOLS)
def test_evolve_and_reload_inside_the_pi_tui(
    tool: str,
    sandbox: dict[str, Path],
    fake_model: FakeModel,
    reef_server: ReefServer,
    scenario_with_releases: Scenario,
    reef_home: Path,
    tmp_path: Path,
) -> None:
    """The person's own pi session, typed into: ``/evolve`` files the ask (no model call);
    ``/versions 3 install`` installs r3 but the session keeps r2's rules until pi's own
    ``/reload`` rereads AGENTS.md, after which the model gets r3's."""
    adapter = PiAdapter(tool=tool, models=["fake-model"])
    routing = Routing(base_url=reef_server.url, scenario=scenario_with_releases.name)
    install_release("pi", routing.scenario, routing, "2", sandbox["agent"])
    argv, extra = adapter.wrapper(sandbox["agent"], routing, [])  # no -p: the TUI
    env = {**_env(sandbox, reef_server), **extra, "TERM": "xterm-256color", "LANG": "C.UTF-8"}
    pane = Pane(tmp_path / "tmux.sock")
    try:
        pane.start(argv, sandbox["work"], env)
        pane.shows("Reef r2", TUI_START)  # the extension's status line: pi is ready

        pane.submit("/evolve always run the tests first")
        pane.shows("queues it on reef serve")
        [filed] = list((reef_home / "asks").glob("*.json"))
        ask = json.loads(filed.read_text())
        assert ask["ask"] == "always run the tests first", pane.screen()
        assert (ask["scenario"], ask["installed_release"], ask["agent"]) == ("e2e", 2, "pi")
        assert ask["reef_session"] == extra[routing.session_env]
        pane.shows(f"Reef: saved your ask for e2e to {filed}.")
        assert fake_model.inference() == [], pane.screen()

        scenario_with_releases.publish(tree_files(f"{RULE_R1}\n{RULE_R2}\n{RULE_R3}"), "commits")
        pane.submit("/versions 3 install")
        pane.shows("Reef: installed r3 of e2e")
        assert RULE_R3 in (sandbox["agent"] / "AGENTS.md").read_text()
        fake_model.push(Turn(text="Answered before the reload."))
        pane.submit("What is the house style?")
        before = json.dumps(_answered(fake_model, pane, 1, "Answered before the reload."))
        assert RULE_R2 in before and RULE_R3 not in before  # the session still has r2

        pane.submit("/reload")  # pi's own command
        pane.shows("Reloaded keybindings, extensions")
        pane.shows("Reef r3")  # Reef's extension was reloaded and read the new install
        fake_model.push(Turn(text="Answered after the reload."))
        pane.submit("And the house style now?")
        after = json.dumps(_answered(fake_model, pane, 2, "Answered after the reload."))
        assert RULE_R3 in after, pane.screen()  # AGENTS.md was read again

        # pi 1.6 reads models.json again too, so the request credits r3; pi 0.73 keeps the
        # header it read at start (docs/adapters-pi.md says so).
        credited = [r.release_id for r in reef_server.records(scenario="e2e")]
        assert credited == ([2, 3] if tool == "pi" else [2, 2]), pane.screen()
    finally:
        pane.kill()

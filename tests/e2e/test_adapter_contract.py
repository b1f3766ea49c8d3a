"""The adapter contract: what every agent adapter must do, checked the same way for each.

Parametrised over ``reef_cli.core.agents.names()``; per-agent facts (config file, the
person's own files, the agent's read tool) are in tests/e2e/contract_profiles.py. The
agents are the pinned binaries in .tools/bin, run through a real `reef serve` in front of
the scripted model; a case is skipped, with the reason shown, only when its binary is
missing. One headless run per adapter (module-scoped, cached) serves tests 3 and 4.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from adapters import _files, get
from adapters._install import install_release, uninstall
from adapters.base import Adapter, Gateway, Routing, Session, ToolCall, Transcript, Turn
from reef_cli.core import agents
from reef_cli.core.errors import GateBlocked, ReefError
from tests.e2e import agent_rig
from tests.e2e.conftest import (
    RULE_R1,
    RULE_R2,
    SCENARIO,
    TOKEN,
    FakeModel,
    ReefServer,
    Scenario,
    tree_files,
)
from tests.e2e.contract_profiles import PERSON_EDIT, Profile, profile
from tests.fakes.upstream import FakeUpstream, Logged
from tests.fakes.upstream import Turn as ModelTurn

#: Installs that never start the agent point at a closed port: nothing may depend on it.
ROUTING = Routing(base_url="http://127.0.0.1:9", scenario=SCENARIO)
RUN_TIMEOUT = 120.0
PROMPT = "Say hello to the contract suite."
ANSWER = "Reef fake answer."
RUN_MARK = "reef-contract-rule-4b1e"
RUN_RULE = f"Answer in plain words ({RUN_MARK})."
CONFIG_MODE = 0o600
FILE_MODE = 0o644
DIR_MODE = 0o755


AGENTS = agent_rig.params(agents.names())


# ----------------------------------------------------------------- helpers

Tree = dict[str, tuple[str, int, bytes | str | None]]


def snapshot(root: Path) -> Tree:
    """Every path under ``root`` (``root`` itself as ``.``): its kind, mode and bytes."""
    tree: Tree = {}
    if not root.exists():
        return tree
    for path in [root, *sorted(root.rglob("*"))]:
        rel = path.relative_to(root).as_posix()
        info = path.lstat()
        mode = stat.S_IMODE(info.st_mode)
        if stat.S_ISLNK(info.st_mode):
            tree[rel] = ("link", mode, os.readlink(path))
        elif stat.S_ISDIR(info.st_mode):
            tree[rel] = ("dir", mode, None)
        else:
            tree[rel] = ("file", mode, path.read_bytes())
    return tree


def plant(target: Path, files: dict[str, bytes], config: str | None = None) -> None:
    """The person's own files, with the modes a person's files have (config private)."""
    target.mkdir(parents=True, exist_ok=True)
    target.chmod(DIR_MODE)
    for rel, data in files.items():
        path = target / rel
        for parent in reversed(path.relative_to(target).parents[:-1]):
            (target / parent).mkdir(exist_ok=True)
            (target / parent).chmod(DIR_MODE)
        path.write_bytes(data)
        path.chmod(CONFIG_MODE if rel == config else FILE_MODE)


def differences(before: Tree, after: Tree) -> list[str]:
    """What changed between two snapshots, one line per path, for a readable failure."""
    out = []
    for rel in sorted(set(before) | set(after)):
        old, new = before.get(rel), after.get(rel)
        if old == new:
            continue
        if old is None:
            out.append(f"+ {rel} (left behind)")
        elif new is None:
            out.append(f"- {rel} (gone)")
        elif old[1] != new[1]:
            out.append(f"~ {rel} mode {oct(old[1])} -> {oct(new[1])}")
        else:
            out.append(f"~ {rel} content changed")
    return out


def contains(actual: Any, expected: Any) -> bool:
    """``expected`` is in ``actual``: dict keys recursively, each list item in some item."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and contains(actual[k], v) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return isinstance(actual, list) and all(
            any(contains(a, e) for a in actual) for e in expected
        )
    return bool(actual == expected)


def adapter_of(name: str) -> Adapter:
    adapter = get(name)
    assert adapter.name == name
    return adapter


# ----------------------------------------------------------------- 1. round trip


@pytest.mark.parametrize("name", AGENTS)
@pytest.mark.parametrize("person", [False, True], ids=["empty-target", "person-files"])
def test_install_then_uninstall_leaves_the_target_as_it_was(
    name: str, person: bool, tmp_path: Path, scenario_with_releases: Scenario
) -> None:
    prof = profile(name)
    target = tmp_path / "agent"
    plant(target, prof.person_files() if person else {}, prof.config)
    before = snapshot(target)

    install_release(name, SCENARIO, ROUTING, "2", target)
    assert snapshot(target) != before, "install wrote nothing"
    assert adapter_of(name).installed(target) is not None
    uninstall(name, target)

    assert differences(before, snapshot(target)) == []
    assert adapter_of(name).installed(target) is None


# ----------------------------------------------------------------- 2. person's files


def _check_person_parts(prof: Profile, target: Path, person: dict[str, bytes]) -> None:
    """The person's content is all there, untouched outside Reef's marked parts."""
    for rel, data in person.items():
        if rel not in (prof.config, prof.instructions):
            assert (target / rel).read_bytes() == data, rel
    rules = (target / prof.instructions).read_text()
    assert _files.without_section(rules) == person[prof.instructions].decode()
    config = (target / prof.config).read_text()
    assert contains(prof.parse(config), prof.person_settings), config
    if prof.reef_in_config is None:  # Reef keeps out of this agent's config altogether
        assert (target / prof.config).read_bytes() == person[prof.config]
    for line in person[prof.config].decode().splitlines():
        if line.lstrip().startswith(prof.comment):  # the person's comments stay too
            assert line in config, f"comment {line!r} lost from {prof.config}"


@pytest.mark.parametrize("name", AGENTS)
def test_the_persons_files_are_kept(
    name: str, tmp_path: Path, scenario_with_releases: Scenario
) -> None:
    prof = profile(name)
    target = tmp_path / "agent"
    person = prof.person_files()
    plant(target, person, prof.config)

    install_release(name, SCENARIO, ROUTING, "1", target)
    _check_person_parts(prof, target, person)
    rules = (target / prof.instructions).read_text()
    assert RULE_R1 in rules and RULE_R2 not in rules
    if prof.reef_in_config is not None:
        assert prof.reef_in_config((target / prof.config).read_text(), ROUTING)

    # Another release replaces only Reef's parts.
    install_release(name, SCENARIO, ROUTING, "2", target)
    _check_person_parts(prof, target, person)
    assert RULE_R2 in (target / prof.instructions).read_text()
    assert adapter_of(name).installed(target)["release"] == 2  # type: ignore[index]

    # The person edits their files while Reef is installed; the edits survive uninstall.
    rules_path, config_path = target / prof.instructions, target / prof.config
    rules_path.write_text(rules_path.read_text() + f"\nLater note ({PERSON_EDIT}).\n")
    config_path.write_text(prof.edit_config(config_path.read_text()))
    later_skill = target / prof.skills_dir / "later-skill" / "SKILL.md"
    later_skill.parent.mkdir(parents=True)
    later_skill.write_bytes(b"---\nname: later-skill\ndescription: Added later.\n---\nbody\n")
    uninstall(name, target)

    rules = rules_path.read_text()
    assert rules.startswith(person[prof.instructions].decode()) and PERSON_EDIT in rules
    assert _files.BEGIN not in rules and _files.END not in rules
    assert RULE_R1 not in rules and RULE_R2 not in rules
    config = config_path.read_text()
    assert PERSON_EDIT in config and contains(prof.parse(config), prof.person_settings)
    assert prof.reef_in_config is None or not prof.reef_in_config(config, ROUTING), config
    assert later_skill.read_bytes().startswith(b"---\nname: later-skill")
    for rel, data in person.items():
        if rel not in (prof.config, prof.instructions):
            assert (target / rel).read_bytes() == data, rel
    assert not (target / _files.STATE_DIR).exists()


# ----------------------------------------------------------------- 3 + 4. one run each


@dataclass
class Run:
    """One headless run of an adapter through a real `reef serve`, kept for two tests."""

    adapter: Adapter
    transcript: Transcript
    target: Path
    reef_home: Path
    records: list[Any] = field(default_factory=list)
    upstream: list[Logged] = field(default_factory=list)


class Runs:
    """Runs each adapter once, on first use, in its own REEF_HOME, model and server."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.done: dict[str, Run | BaseException] = {}

    def of(self, name: str) -> Run:
        if name not in self.done:
            try:
                self.done[name] = self._run(name, self.root / name)
            except Exception as exc:  # both tests report the same failure
                self.done[name] = exc
        found = self.done[name]
        if isinstance(found, BaseException):
            raise found
        return found

    def _run(self, name: str, root: Path) -> Run:
        from reef_cli.core import scenarios
        from reef_cli.core.tokens import TokenSet
        from reef_cli.server.app import create_app
        from reef_cli.server.serve_config import ServeConfig
        from tests.fakes.server_thread import ServerThread

        work = root / "work"
        work.mkdir(parents=True)
        home = root / "reef-home"
        with pytest.MonkeyPatch.context() as patch:
            for key in [k for k in os.environ if k.startswith("REEF_")]:
                patch.delenv(key)
            patch.setenv("REEF_HOME", str(home))
            scenarios.create(SCENARIO)
            fake = FakeUpstream(default=ModelTurn(text=ANSWER))
            with ServerThread(fake.app) as model:
                config = ServeConfig(
                    upstream=model.url + "/v1", upstream_dialect="openai", release_cache_seconds=0
                )
                app = create_app(config, tokens=TokenSet(TOKEN))
                with ServerThread(app) as server:
                    adapter = adapter_of(name)
                    transcript = adapter.run_headless(
                        tree_files(RUN_RULE),
                        PROMPT,
                        work,
                        Gateway(server.url, SCENARIO, TOKEN, "fake-model"),
                        timeout=RUN_TIMEOUT,
                    )
                    records = ReefServer(app, server, TOKEN, home).records()
            upstream = FakeModel(fake, model).inference()
        return Run(adapter, transcript, work / ".reef-agent", home, records, upstream)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    yield Runs(tmp_path_factory.mktemp("contract-runs"))


def _failed(run: Run) -> str:
    return _shown(run.transcript)


def _shown(t: Transcript) -> str:
    """A failed run, readable: how it ended and the tail of what it printed."""
    return (
        f"rc={t.returncode} timed_out={t.timed_out}\n"
        f"stdout:\n{t.stdout[-3000:]}\nstderr:\n{t.stderr[-3000:]}"
    )


@pytest.mark.parametrize("name", AGENTS)
def test_the_run_routes_through_reef_with_scenario_and_session(name: str, runs: Runs) -> None:
    run = runs.of(name)
    transcript = run.transcript
    assert transcript.ok, _failed(run)
    assert ANSWER in transcript.stdout, _failed(run)
    assert transcript.session_id, "run_headless did not say which Reef session it used"
    assert run.records, "reef serve recorded nothing"
    assert {r.scenario for r in run.records} == {SCENARIO}
    assert {r.session_id for r in run.records} == {transcript.session_id}
    assert all(r.status == 200 for r in run.records), [r.summary() for r in run.records]
    # the installed tree's rule reached the model, through Reef
    assert any(RUN_MARK in json.dumps(r.request) for r in run.records)
    assert run.upstream and any(RUN_MARK in json.dumps(e.body) for e in run.upstream)


@pytest.mark.parametrize("name", AGENTS)
def test_harvest_returns_typed_turns(
    name: str, runs: Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = runs.of(name)
    assert run.transcript.ok, _failed(run)
    monkeypatch.setenv("REEF_HOME", str(run.reef_home))  # receipts: that run's record store
    sessions = run.adapter.harvest(run.target)
    assert sessions and all(isinstance(s, Session) for s in sessions), sessions
    for session in sessions:
        assert session.agent and session.session_id
        for turn in session.turns:
            assert isinstance(turn, Turn) and turn.role in ("user", "assistant", "tool"), turn
            assert isinstance(turn.text, str), turn
            assert all(isinstance(c, ToolCall) for c in turn.tool_calls), turn
    assert run.transcript.session is not None, "run_headless found no session of its run"
    mine = [s for s in sessions if s.session_id == run.transcript.session.session_id]
    assert len(mine) == 1, [s.session_id for s in sessions]
    turns = mine[0].turns
    assert any(t.role == "user" and t.text.strip() == PROMPT for t in turns), turns
    assert any(t.role == "assistant" and ANSWER in t.text for t in turns), turns
    assert set(mine[0].receipts) == {r.id for r in run.records}


# ----------------------------------------------------------------- 5. pending release


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in agents.names()])
def test_a_pending_release_is_refused_and_nothing_is_written(
    name: str, tmp_path: Path, scenario_with_releases: Scenario
) -> None:
    from reef_cli.core.publishing import publish_files

    files = {**tree_files(RULE_R1), "extensions/x.ts": "export default function () {}\n"}
    release, _ = publish_files(SCENARIO, files, reason="an extension", reviewed=False)
    assert release.meta.status == "pending"
    prof = profile(name)
    fresh, lived_in = tmp_path / "fresh", tmp_path / "lived-in"
    plant(lived_in, prof.person_files(), prof.config)
    before = snapshot(lived_in)
    for target in (fresh, lived_in):
        for spec in (str(release.number), "latest"):
            with pytest.raises(GateBlocked, match="pending review"):
                install_release(name, SCENARIO, ROUTING, spec, target)
    assert not fresh.exists()
    assert differences(before, snapshot(lived_in)) == []


# ----------------------------------------------------------------- 6. in the sandbox

SECRET = "caller-home-secret-91d2"
VISIBLE = "workdir-note-6a0f"


@pytest.mark.parametrize("name", AGENTS)
def test_run_headless_in_the_sandbox_sees_nothing_of_home(
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake_model: FakeModel,
    reef_server: ReefServer,
    scenario_with_releases: Scenario,
) -> None:
    """The scripted model has the agent read a file in its work dir and one in the
    caller's HOME: the first comes back (the agent's tools work in the sandbox), the
    second does not (the caller's HOME is not there)."""
    from recipes.engine.trial import sandboxed

    prof = profile(name)
    caller_home = tmp_path / "caller-home"
    caller_home.mkdir()
    secret = caller_home / "secret.txt"
    secret.write_text(f"{SECRET}\n")
    monkeypatch.setenv("HOME", str(caller_home))
    home_before = snapshot(caller_home)
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text(f"{VISIBLE}\n")

    def chooser(path: str, body: dict[str, Any]) -> ModelTurn | None:
        """Read the work dir's file, then the HOME one (one call a turn: an agent may end
        its run when a call is refused), then answer."""
        if not body.get("tools"):
            return None  # a side request (a title): the default answer
        answered = sum(m.get("role") == "tool" for m in body.get("messages") or [])
        reads = [str(work / "notes.txt"), str(secret)]
        if answered < len(reads):
            return ModelTurn(text="", tool_calls=[prof.read_call(reads[answered])])
        return None  # the default: a plain answer, which ends the run

    fake_model.fake.chooser = chooser
    adapter = adapter_of(name)
    transcript = adapter.run_headless(
        tree_files(RUN_RULE),
        PROMPT,
        work,
        Gateway(reef_server.url, SCENARIO, reef_server.token, "fake-model"),
        launch=sandboxed(reef_server.server.port),
        timeout=RUN_TIMEOUT,
    )
    assert transcript.ok, _shown(transcript)
    assert transcript.isolation == "bwrap"
    assert transcript.session_id
    records = reef_server.records(session_id=transcript.session_id)
    assert records and {r.scenario for r in records} == {SCENARIO}
    assert len(records) == len(reef_server.records()), "a model call outside the run's session"

    tool_results = json.dumps(
        [
            m
            for e in fake_model.inference()
            for m in e.body.get("messages", [])
            if m.get("role") == "tool"
        ]
    )
    assert VISIBLE in tool_results, (
        f"the agent's read tool did not work in the sandbox: {tool_results[:2000]}"
    )
    assert SECRET not in json.dumps([e.body for e in fake_model.log])
    assert SECRET not in json.dumps([r.request for r in records])
    assert SECRET not in transcript.stdout + transcript.stderr
    agent_files = snapshot(work / ".reef-agent")
    assert not any(
        isinstance(v[2], bytes) and SECRET.encode() in v[2] for v in agent_files.values()
    )
    assert differences(home_before, snapshot(caller_home)) == []


# ----------------------------------------------------------------- 7. bad input


@pytest.mark.parametrize("name", AGENTS)
def test_a_corrupt_config_is_a_clear_error_and_nothing_is_written(
    name: str, tmp_path: Path, scenario_with_releases: Scenario
) -> None:
    prof = profile(name)
    target = tmp_path / "agent"
    plant(target, {**prof.person_files(), prof.config: prof.corrupt_config}, prof.config)
    before = snapshot(target)
    with pytest.raises(ReefError) as raised:
        install_release(name, SCENARIO, ROUTING, "1", target)
    error = raised.value
    assert type(error) is not ReefError, "a bare ReefError: raise a subclass"
    assert error.hint, f"no hint: {error.message}"
    assert "\n" not in error.one_line()
    assert prof.config in error.message + error.hint, error.one_line()
    assert differences(before, snapshot(target)) == []
    assert adapter_of(name).installed(target) is None

"""The pi adapter without pi: rendering, merging, bad input, harvest of real fixtures."""

from __future__ import annotations

import json
import os
import stat
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters import _files
from adapters.base import ReleaseToInstall, Routing
from adapters.pi import harvest as pi_harvest
from adapters.pi import headless
from adapters.pi.adapter import (
    InstallError,
    NotInstalled,
    PiAdapter,
    PiNotFound,
    PiSession,
    PiUnsupported,
)
from tests.adapters.helpers import fake_agent, snapshot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pi"
ROUTING = Routing(base_url="http://127.0.0.1:9", scenario="demo")  # nothing listens on :9

PERSON_AGENTS = "# Mine\r\n\r\nTabs, not spaces."  # CRLF, no final newline
PERSON_MODELS = '{"providers":{"ollama":{"baseUrl":"http://h/v1","api":"openai-completions","apiKey":"k","models":[{"id":"q"}]}},"x":1}'


def release(number: int = 1, rule: str = "Run the tests first.", **extra: str) -> ReleaseToInstall:
    files = {
        "reef.toml": "format = 1\n",
        "rules/style.md": f"---\nowner: team\n---\n# Style\n\n{rule}\n",
        "skills/bisect/SKILL.md": "---\nname: bisect\ndescription: Use git bisect.\n---\nBody.\n",
        "skills/bisect/notes.md": "more\n",
        "commands/review.md": (
            "---\ndescription: Review\nargument-hint: '[path]'\n---\nReview $ARGUMENTS\n"
        ),
        "extensions/hello.ts": "export default function (pi: any) {}\n",
        **extra,
    }
    return ReleaseToInstall("demo", number, files, f"sha256:{number}", latest=3)


@pytest.fixture
def adapter() -> PiAdapter:
    return PiAdapter(models=["m1", "m2"], discover_models=False)


@pytest.fixture
def target(tmp_path: Path) -> Path:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "AGENTS.md").write_bytes(PERSON_AGENTS.encode())
    (agent / "models.json").write_bytes(PERSON_MODELS.encode())
    return agent


def fake_pi(tmp_path: Path, version_line: str, code: int = 0, to_stderr: bool = False) -> str:
    return fake_agent(tmp_path / "bin", "pi", version_line, code=code, to_stderr=to_stderr)


# ----------------------------------------------------------------- render


def test_install_renders_pi_layout(adapter: PiAdapter, target: Path, reef_home: Path) -> None:
    adapter.install(release(), target, ROUTING)
    agents = (target / "AGENTS.md").read_bytes().decode()
    assert agents.startswith(PERSON_AGENTS)  # CRLFs and all
    section = agents[agents.index(_files.BEGIN) :]
    assert "# Reef harness: demo r1" in section and "Run the tests first." in section
    assert "owner: team" not in section  # rule frontmatter is not instructions
    assert (target / "skills/bisect/SKILL.md").read_text().startswith("---\nname: bisect")
    assert (target / "skills/bisect/notes.md").read_text() == "more\n"
    assert "argument-hint" in (target / "prompts/review.md").read_text()
    assert (target / "extensions/hello.ts").exists()
    assert not (target / "reef.toml").exists() and not (target / "rules").exists()

    config = json.loads((target / "extensions/reef/reef.json").read_text())
    assert config["scenario"] == "demo" and config["release"] == 1
    assert config["target"] == str(target)
    # this installation's `reef` (the extension resolves it again when it runs)
    assert config["command"] == [str(Path(sys.executable).parent / "reef")]
    assert config["cliEnv"] == "REEF_CLI"
    assert config["env"] == {
        "REEF_HOME": str(reef_home),
        "REEF_SERVE_HOST": "127.0.0.1",
        "REEF_SERVE_PORT": "9",
    }
    assert config["asksDir"] == str(reef_home / "asks")
    source = (target / "extensions/reef/index.ts").read_text()
    assert json.dumps(str(target / "extensions/reef/reef.json")) in source
    for needle in ('registerCommand("versions"', 'registerCommand("evolve"', '"session_start"'):
        assert needle in source

    models = json.loads((target / "models.json").read_text())
    assert models["x"] == 1 and models["providers"]["ollama"]["models"] == [{"id": "q"}]
    reef = models["providers"]["reef"]
    assert reef["baseUrl"] == "http://127.0.0.1:9/v1" and reef["api"] == "openai-completions"
    assert reef["apiKey"].startswith("!printenv REEF_TOKEN || cat ")
    assert reef["headers"] == {
        "x-reef-scenario": "!echo demo",
        "x-reef-session": "!printenv REEF_SESSION_ID || echo none",
        "x-reef-release-id": "!echo 1",  # the installed release, not the served one
    }
    assert [m["id"] for m in reef["models"]] == ["m1", "m2"]
    assert adapter.installed(target) == {
        "scenario": "demo",
        "release": 1,
        "content_hash": "sha256:1",
        "latest": 3,
        "base_url": "http://127.0.0.1:9",
        "models": ["m1", "m2"],
        "target": str(target),
        "reef_command": str(Path(sys.executable).parent / "reef"),
    }


def test_header_commands_run_in_sh_like_pi_runs_them(
    adapter: PiAdapter, target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pi runs `!command` values with /bin/sh: they must print something, set or not."""
    import subprocess

    adapter.install(release(), target, ROUTING)
    reef = json.loads((target / "models.json").read_text())["providers"]["reef"]

    def sh(command: str, env: dict[str, str]) -> str:
        done = subprocess.run(
            ["/bin/sh", "-c", command[1:]], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0
        return done.stdout.strip()

    base = {"PATH": os.environ["PATH"]}
    assert sh(reef["headers"]["x-reef-session"], base) == "none"
    assert sh(reef["headers"]["x-reef-session"], {**base, "REEF_SESSION_ID": "s-1"}) == "s-1"
    assert sh(reef["headers"]["x-reef-scenario"], base) == "demo"
    assert sh(reef["headers"]["x-reef-release-id"], base) == "1"
    assert sh(reef["apiKey"], base) == "reef-no-token"
    assert sh(reef["apiKey"], {**base, "REEF_TOKEN": "tok"}) == "tok"


def test_reinstall_replaces_reef_parts_only(adapter: PiAdapter, target: Path) -> None:
    adapter.install(release(1), target, ROUTING)
    adapter.install(
        release(2, rule="Second rule.", **{"skills/other/SKILL.md": "x"}), target, ROUTING
    )
    agents = (target / "AGENTS.md").read_text()
    assert agents.count(_files.BEGIN) == 1 and "Second rule." in agents
    assert "Run the tests first." not in agents
    assert (target / "skills/other/SKILL.md").exists()
    assert adapter.installed(target)["release"] == 2  # type: ignore[index]
    # a later release without a file takes that file away
    adapter.install(release(3), target, ROUTING)
    assert not (target / "skills/other").exists()


def test_uninstall_restores_person_files_byte_for_byte(adapter: PiAdapter, target: Path) -> None:
    before = snapshot(target)
    adapter.install(release(1), target, ROUTING)
    adapter.install(release(2, rule="Other."), target, ROUTING)
    assert snapshot(target) != before
    adapter.uninstall(target)
    assert snapshot(target) == before
    with pytest.raises(NotInstalled, match="not installed"):
        adapter.uninstall(target)


def test_uninstall_without_person_files_leaves_nothing(adapter: PiAdapter, tmp_path: Path) -> None:
    agent = tmp_path / "fresh" / "agent"
    adapter.install(release(), agent, ROUTING)
    assert (agent / "models.json").exists()
    adapter.uninstall(agent)
    assert list(agent.iterdir()) == []


def test_uninstall_keeps_edits_made_after_install(adapter: PiAdapter, target: Path) -> None:
    adapter.install(release(), target, ROUTING)
    with (target / "AGENTS.md").open("a") as handle:
        handle.write("\nAdded later.\n")
    models = json.loads((target / "models.json").read_text())
    models["providers"]["mine"] = {"baseUrl": "http://m/v1"}
    (target / "models.json").write_text(json.dumps(models))
    adapter.uninstall(target)
    agents = (target / "AGENTS.md").read_bytes().decode()
    assert agents.startswith(PERSON_AGENTS) and "Added later." in agents
    assert _files.BEGIN not in agents and "Run the tests first." not in agents
    providers = json.loads((target / "models.json").read_text())["providers"]
    assert sorted(providers) == ["mine", "ollama"]


# ----------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"providers": {', "not valid JSON"),
        ("[1, 2]", "must hold a JSON object"),
        ('{"providers": []}', '"providers" must be an object'),
    ],
)
def test_corrupt_models_json_installs_nothing(
    adapter: PiAdapter, target: Path, text: str, message: str
) -> None:
    (target / "models.json").write_text(text)
    before = snapshot(target)
    with pytest.raises(InstallError, match=message) as caught:
        adapter.install(release(), target, ROUTING)
    assert caught.value.hint and "models.json" in caught.value.hint
    assert snapshot(target) == before


def test_agents_md_that_is_not_utf8_installs_nothing(adapter: PiAdapter, target: Path) -> None:
    (target / "AGENTS.md").write_bytes(b"caf\xe9\n")
    before = snapshot(target)
    with pytest.raises(InstallError, match="not UTF-8"):
        adapter.install(release(), target, ROUTING)
    assert snapshot(target) == before


def test_target_under_a_file_is_refused(adapter: PiAdapter, tmp_path: Path) -> None:
    """Tests run as root, which writes through permission bits; a path whose parent is a
    regular file cannot be created by anyone."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    with pytest.raises(InstallError, match="not a writable directory") as caught:
        adapter.install(release(), blocker / "agent", ROUTING)
    assert caught.value.hint
    assert [p.name for p in tmp_path.iterdir()] == ["not-a-dir"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permission bits")
def test_read_only_target_is_refused(adapter: PiAdapter, target: Path) -> None:
    before = snapshot(target)
    target.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with pytest.raises(InstallError):
            adapter.install(release(), target, ROUTING)
    finally:
        target.chmod(0o755)
    assert snapshot(target) == before


@pytest.mark.parametrize("failing", [1, 5, 7, 8, 9])  # 6 owned, 2 merged, the manifest
def test_a_failed_write_rolls_everything_back(
    adapter: PiAdapter, target: Path, monkeypatch: pytest.MonkeyPatch, failing: int
) -> None:
    before = snapshot(target)
    real = _files.atomic_write_text
    calls = {"n": 0}

    def flaky(path: Path, text: str, mode: int | None = None) -> None:
        calls["n"] += 1
        if calls["n"] == failing:
            raise OSError(28, "No space left on device")
        real(path, text, mode)

    monkeypatch.setattr(_files, "atomic_write_text", flaky)
    with pytest.raises(OSError, match="No space"):
        adapter.install(release(), target, ROUTING)
    assert calls["n"] == failing
    assert snapshot(target) == before


def test_own_files_with_release_names_are_not_overwritten(adapter: PiAdapter, target: Path) -> None:
    (target / "skills/bisect").mkdir(parents=True)
    (target / "skills/bisect/SKILL.md").write_text("mine")
    (target / "prompts").mkdir()
    (target / "prompts/review.md").write_text("mine too")
    before = snapshot(target)
    with pytest.raises(InstallError, match="overwrite your own") as caught:
        adapter.install(release(), target, ROUTING)
    assert "prompts/review.md" in caught.value.message
    assert "skills/bisect/SKILL.md" in caught.value.message
    assert snapshot(target) == before


def test_extension_named_reef_is_refused(adapter: PiAdapter, target: Path) -> None:
    before = snapshot(target)
    with pytest.raises(InstallError, match="named 'reef'"):
        adapter.install(release(**{"extensions/reef.ts": "x"}), target, ROUTING)
    assert snapshot(target) == before


# ----------------------------------------------------------------- binary and wrapper


def test_missing_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(PiNotFound, match="pi is not installed at ") as caught:
        PiAdapter(binary=str(tmp_path / "nope")).check_binary()
    assert caught.value.hint
    monkeypatch.setenv("REEF_TOOLS_BIN", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(PiNotFound, match="looked for `pi` in ") as caught:
        PiAdapter().check_binary()
    assert "install_agents.sh" in (caught.value.hint or "")


@pytest.mark.parametrize("line", ["0.50.2", "2.0.0"])
def test_unsupported_version(tmp_path: Path, line: str) -> None:
    with pytest.raises(PiUnsupported, match=f"pi {line} .* is not supported") as caught:
        PiAdapter(binary=fake_pi(tmp_path, line)).check_binary()
    assert caught.value.hint


def test_binary_that_does_not_answer_version(tmp_path: Path) -> None:
    with pytest.raises(PiUnsupported, match=r"--version failed \(exit 1: 'node: too old'\)"):
        PiAdapter(binary=fake_pi(tmp_path, "node: too old", code=1)).check_binary()


@pytest.mark.parametrize(("line", "to_stderr"), [("1.6.0", False), ("0.73.1", True)])
def test_supported_versions(tmp_path: Path, line: str, to_stderr: bool) -> None:
    found = PiAdapter(binary=fake_pi(tmp_path, line, to_stderr=to_stderr)).check_binary()
    assert found.version_text == line


def test_wrapper(adapter: PiAdapter, target: Path, tmp_path: Path) -> None:
    with pytest.raises(NotInstalled, match="not installed"):
        adapter.wrapper(target, ROUTING, [])
    adapter.install(release(), target, ROUTING)
    adapter.binary = fake_pi(tmp_path, "1.6.0")
    argv, env = adapter.wrapper(target, ROUTING, ["-p", "hi"])
    assert argv == [adapter.binary, "--provider", "reef", "--model", "m1", "-p", "hi"]
    assert env["PI_CODING_AGENT_DIR"] == str(target)
    _, env2 = adapter.wrapper(target, ROUTING, [])
    assert len(env["REEF_SESSION_ID"]) == 36 and env["REEF_SESSION_ID"] != env2["REEF_SESSION_ID"]
    argv, _ = adapter.wrapper(target, ROUTING, ["--model", "reef/m2"])
    assert argv == [adapter.binary, "--model", "reef/m2"]


def test_default_target(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "x"))
    assert PiAdapter().default_target() == tmp_path / "x"
    monkeypatch.delenv("PI_CODING_AGENT_DIR")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert PiAdapter().default_target() == tmp_path / ".pi" / "agent"


def test_headless_run_is_bounded(tmp_path: Path) -> None:
    script = tmp_path / "slow"
    script.write_text("#!/bin/sh\necho started\nsleep 30\n")
    script.chmod(0o755)
    done = headless.run([str(script)], tmp_path, {"PATH": os.environ["PATH"]}, timeout=1)
    assert done.timed_out and done.returncode == 124 and "did not finish" in done.stderr


# ----------------------------------------------------------------- harvest


@pytest.mark.parametrize("name", ["session-1.6.jsonl", "session-0.73.jsonl"])
def test_harvest_real_sessions(name: str) -> None:
    session = pi_harvest.parse_file(FIXTURES / name)
    assert isinstance(session, PiSession) and session.agent == "pi" and session.version == 3
    assert [t.role for t in session.turns] == ["user", "assistant", "tool", "assistant"]
    assert session.turns[0].text == "Why does test_x fail?"
    assert session.turns[1].text == "Let me look."
    call = session.turns[1].tool_calls[0]
    assert call.name == "read" and call.arguments["path"].endswith("bisect-regressions/SKILL.md")
    assert "name: bisect-regressions" in session.turns[2].text
    assert session.turns[3].text == "Use git bisect." and session.turns[3].model == "reef/default"
    assert session.skills_used == ["bisect-regressions"]
    assert session.model == "reef/default"
    assert len(session.receipts) == 2 and all(r.startswith("rec_") for r in session.receipts)
    assert session.reef_session_id and len(session.reef_session_id) == 36
    assert session.started_at and session.ended_at and session.started_at < session.ended_at
    assert session.cwd and session.cwd.endswith("/work")
    assert session.to_json()["reef_session_id"] == session.reef_session_id


def test_harvest_follows_the_leaf_branch() -> None:
    session = pi_harvest.parse_file(FIXTURES / "session-branched.jsonl")
    assert session is not None
    assert [(t.role, t.text) for t in session.turns] == [
        ("user", "Try a different approach."),
        ("assistant", "Branch answer."),
    ]
    assert session.receipts == [] and session.skills_used == []


def test_harvest_dir_since_and_record_links(
    tmp_path: Path, reef_home: Path, adapter: PiAdapter
) -> None:
    from reef_cli.core.records import Record
    from reef_cli.core.store.sqlite import SQLiteStore

    folder = tmp_path / "agent" / "sessions" / "--tmp-work--"
    folder.mkdir(parents=True)
    for name in ("session-1.6.jsonl", "session-0.73.jsonl"):
        (folder / name).write_bytes((FIXTURES / name).read_bytes())
    (folder / "broken.jsonl").write_text('{"type": "message"\n')  # no header: skipped
    sessions = adapter.harvest(tmp_path / "agent")
    assert len(sessions) == 2
    first = sessions[0]
    assert isinstance(first, PiSession)
    store = SQLiteStore()
    store.insert(
        Record("rec_fromstore", "e2e", "openai", "openai", session_id=first.reef_session_id)
    )
    store.close()
    again = adapter.harvest(tmp_path / "agent")
    assert again[0].receipts[-1] == "rec_fromstore" and len(again[0].receipts) == 3
    assert len(again[1].receipts) == 2
    assert adapter.harvest(tmp_path / "agent", since=datetime.now(UTC)) == []

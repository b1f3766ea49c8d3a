"""Codex adapter without the agent running: rendering, the person's files, the profile, the
hook, harvest of real rollouts, the wrapper and every refusal. A stand-in ``codex`` script
answers ``--version``; the real binary runs in tests/e2e/test_codex.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from adapters._binary import AgentNotFound as CodexNotFound
from adapters._binary import AgentVersionUnsupported as CodexUnsupported
from adapters._binary import parse_version
from adapters._files import InstallError
from adapters._install import install_release, uninstall
from adapters.base import Routing
from adapters.codex import harvest as harvest_mod
from adapters.codex import headless, hook, profile, render, versions
from adapters.codex.adapter import CodexAdapter
from reef_cli.core import scenarios
from reef_cli.core.errors import TreeError
from reef_cli.core.publishing import publish_files
from reef_cli.core.records import Record
from reef_cli.core.store.sqlite import SQLiteStore
from tests.adapters.helpers import fake_agent, hook_output, release, snapshot, tree

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
ROUTING = Routing(base_url="http://127.0.0.1:9", scenario="demo")  # nothing listens there
FIXTURE_SESSION = "01a2329b-a20c-7361-a70f-9123257a40cb"
OTHER_SESSION = "01a20000-0000-7000-8000-000000000000"

#: A person's own config.toml: comments, tables, their providers, odd spacing, no final
#: newline. Reef must never change a byte of it.
PERSON_CONFIG = (
    b"# my Codex settings\n"
    b'model = "gpt-5-codex"\n'
    b'model_provider = "mine"   # trailing comment\n'
    b"\n"
    b"[model_providers.mine]\n"
    b'name = "Mine"\n'
    b'base_url = "https://llm.example.com/v1"\n'
    b'env_key = "MY_KEY"\n'
    b"\n"
    b"[mcp_servers.docs]\n"
    b'command = "docs-mcp"\n'
    b'args = ["--port", "0"]\n'
    b"\n"
    b'[projects."/home/me/code"]\n'
    b'trust_level = "trusted"'
)
PERSON_AGENTS = b"# My notes\r\n\r\nAlways be kind (person-rule-0b7e).\r\n"


def fake_codex(folder: Path, version: str = "codex-cli 0.171.0", sleep: float = 0) -> str:
    return fake_agent(folder, "codex", version, then=f"sleep {sleep}\necho ran")


@pytest.fixture
def adapter(tmp_path: Path) -> CodexAdapter:
    return CodexAdapter(binary=fake_codex(tmp_path / "bin"), model="fake-model")


@pytest.fixture
def chain(reef_home: Path) -> str:
    scenarios.create("demo")
    publish_files("demo", tree("Rule one (rule-r1)."), reason="first", reviewed=True)
    publish_files("demo", tree("Rule one (rule-r1).\nRule two (rule-r2)."), reason="add rule two")
    return "demo"


def read_profile(target: Path) -> dict[str, Any]:
    return tomllib.loads((target / profile.REL).read_text())


# ---------------------------------------------------------------- install / uninstall


def test_install_renders_rules_skills_commands_profile_and_hooks(
    adapter: CodexAdapter, tmp_path: Path
) -> None:
    target = tmp_path / "codex-home"
    files = tree("Be brief (rule-x).", extra={"extensions/notify.ts": "export default 1\n"})
    adapter.install(release(3, files), target, ROUTING)

    assert set(snapshot(target, folders=False)) == {
        "AGENTS.md",
        "reef.config.toml",
        "skills/fix-bugs/SKILL.md",
        "skills/fix-bugs/checklist.md",
        "skills/review/SKILL.md",
        "skills/review/agents/openai.yaml",
        "skills/versions/SKILL.md",
        "skills/versions/agents/openai.yaml",
        ".reef/hook.json",
        ".reef/install.json",
    }
    agents_md = (target / "AGENTS.md").read_text()
    assert 'scenario "demo", release r3' in agents_md and "Be brief (rule-x)." in agents_md
    # a command becomes a skill the person runs as $review, never offered to the model
    review = (target / "skills/review/SKILL.md").read_text()
    head = yaml.safe_load(review.split("---\n")[1])
    assert head == {"name": "review", "description": "Review the diff (arguments: [files])"}
    assert "Review $ARGUMENTS." in review and "typing `$review`" in review
    assert (
        "allow_implicit_invocation: false"
        in (target / "skills/review/agents/openai.yaml").read_text()
    )
    assert "name: versions" in (target / "skills/versions/SKILL.md").read_text()

    data = read_profile(target)
    assert data["model_provider"] == "reef" and data["model"] == "fake-model"
    assert data["model_providers"]["reef"] == {
        "name": "Reef",
        "base_url": "http://127.0.0.1:9/v1",
        "wire_api": "responses",
        "env_key": "REEF_TOKEN",
        "http_headers": {"x-reef-scenario": "demo", "x-reef-release-id": "3"},
        "env_http_headers": {"x-reef-session": "REEF_SESSION_ID"},
    }
    assert data["analytics"] == {"enabled": False} and data["features"] == {"plugins": False}
    assert data["check_for_update_on_startup"] is False
    source = str((target / profile.REL).resolve())
    for event, label in profile.EVENTS.items():
        (group,) = data["hooks"][event]
        (entry,) = group["hooks"]
        assert entry["type"] == "command" and entry["timeout"] == profile.HOOK_TIMEOUT
        assert (
            " hook codex " in entry["command"]
            and str(target / ".reef/hook.json") in entry["command"]
        )
        state = data["hooks"]["state"][f"{source}:{label}:0:0"]
        assert state["trusted_hash"] == profile.trusted_hash(event, entry["command"])

    record = adapter.installed(target)
    assert record is not None
    assert record["adapter"] == "codex" and record["release"] == 3
    assert record["skipped"] == ["extensions/notify.ts"] and record["model"] == "fake-model"
    assert record["agent_version"] == "0.171.0" and record["base_url"] == ROUTING.base_url
    config = json.loads((target / ".reef/hook.json").read_text())
    assert config["scenario"] == "demo" and config["target"] == str(target)
    assert not (target / "config.toml").exists()


def test_person_files_come_back_byte_for_byte(adapter: CodexAdapter, tmp_path: Path) -> None:
    target = tmp_path / "codex-home"
    (target / "skills/my-own").mkdir(parents=True)
    (target / "skills/my-own/SKILL.md").write_text("---\nname: my-own\ndescription: mine\n---\n")
    (target / "config.toml").write_bytes(PERSON_CONFIG)
    (target / "AGENTS.md").write_bytes(PERSON_AGENTS)
    (target / "hooks.json").write_text('{"hooks": {}}\n')
    before = snapshot(target, folders=False)

    adapter.install(release(1), target, ROUTING)
    assert (target / "config.toml").read_bytes() == PERSON_CONFIG  # never written
    agents_md = (target / "AGENTS.md").read_bytes()
    assert agents_md.startswith(PERSON_AGENTS) and b"rule-x" in agents_md

    adapter.uninstall(target)
    assert snapshot(target, folders=False) == before
    assert adapter.installed(target) is None


def test_reinstall_replaces_only_reef_parts(adapter: CodexAdapter, tmp_path: Path) -> None:
    target = tmp_path / "codex-home"
    target.mkdir()
    (target / "config.toml").write_bytes(PERSON_CONFIG)
    (target / "AGENTS.md").write_bytes(PERSON_AGENTS)
    first = tree(
        "Old rule (rule-old).",
        extra={"skills/old-skill/SKILL.md": "---\nname: old-skill\ndescription: d\n---\n"},
    )
    adapter.install(release(1, first), target, ROUTING)
    # what Codex itself writes into the active profile: a trusted folder, a TUI flag
    with (target / profile.REL).open("a") as handle:
        handle.write(
            '\n[projects."/home/me/code"]\ntrust_level = "trusted"\n\n[tui]\nnotice = true\n'
        )

    adapter.install(release(2, tree("New rule (rule-new).")), target, ROUTING)
    agents_md = (target / "AGENTS.md").read_bytes()
    assert agents_md.startswith(PERSON_AGENTS)
    assert b"rule-new" in agents_md and b"rule-old" not in agents_md
    assert agents_md.count(b"reef:begin") == 1
    assert not (target / "skills/old-skill").exists()  # the stale skill of r1 is gone
    data = read_profile(target)
    assert data["projects"] == {"/home/me/code": {"trust_level": "trusted"}}  # Codex's kept
    assert data["tui"] == {"notice": True}
    assert data["model_providers"]["reef"]["http_headers"]["x-reef-release-id"] == "2"
    assert (target / "config.toml").read_bytes() == PERSON_CONFIG

    # the person edits AGENTS.md after the install: uninstall keeps their edit
    (target / "AGENTS.md").write_bytes(agents_md + b"\r\nMy later note.\r\n")
    adapter.uninstall(target)
    kept = (target / "AGENTS.md").read_bytes()
    assert kept.startswith(PERSON_AGENTS) and kept.endswith(b"\r\nMy later note.\r\n")
    assert b"reef" not in kept and b"rule-new" not in kept
    assert not (target / profile.REL).exists()
    assert (target / "config.toml").read_bytes() == PERSON_CONFIG


def test_rules_go_to_agents_override_when_the_person_has_one(
    adapter: CodexAdapter, tmp_path: Path
) -> None:
    """Codex 0.171 reads AGENTS.override.md instead of AGENTS.md when it exists."""
    target = tmp_path / "codex-home"
    target.mkdir()
    (target / "AGENTS.md").write_bytes(b"plain\n")
    (target / "AGENTS.override.md").write_bytes(b"override\n")
    adapter.install(release(1), target, ROUTING)
    assert (target / "AGENTS.md").read_bytes() == b"plain\n"
    assert b"rule-x" in (target / "AGENTS.override.md").read_bytes()
    adapter.uninstall(target)
    assert (target / "AGENTS.override.md").read_bytes() == b"override\n"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (b'model = "x\n[broken', "is not valid TOML"),
        (b"\xff\xfe not utf-8", "is not UTF-8 text"),
        (b'[model_providers.reef]\nname = "theirs"\n', "defines its own [model_providers.reef]"),
    ],
)
def test_unusable_config_toml_installs_nothing(
    adapter: CodexAdapter, tmp_path: Path, config: bytes, message: str
) -> None:
    target = tmp_path / "codex-home"
    target.mkdir()
    (target / "config.toml").write_bytes(config)
    (target / "AGENTS.md").write_bytes(PERSON_AGENTS)
    before = snapshot(target, folders=False)
    with pytest.raises(InstallError) as caught:
        adapter.install(release(1), target, ROUTING)
    assert message in caught.value.message and "nothing was installed" in caught.value.message
    assert "\n" not in caught.value.one_line()
    assert snapshot(target, folders=False) == before


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"skills/versions/SKILL.md": "---\nname: versions\ndescription: d\n---\n"}, "'versions'"),
        ({"commands/versions.md": "---\ndescription: d\n---\nx\n"}, "'versions'"),
        ({"commands/fix-bugs.md": "---\ndescription: d\n---\nx\n"}, "both a skill and a command"),
    ],
)
def test_names_codex_cannot_hold_are_refused(
    adapter: CodexAdapter, tmp_path: Path, files: dict[str, str], message: str
) -> None:
    with pytest.raises(InstallError) as caught:
        adapter.install(release(1, tree("r", extra=files)), tmp_path / "t", ROUTING)
    assert message in caught.value.message
    assert not (tmp_path / "t" / ".reef").exists()


def test_refuses_to_overwrite_the_person_s_own_files(adapter: CodexAdapter, tmp_path: Path) -> None:
    target = tmp_path / "codex-home"
    (target / "skills/fix-bugs").mkdir(parents=True)
    (target / "skills/fix-bugs/notes.md").write_text("mine\n")
    (target / profile.REL).write_text('model = "mine"\n')
    before = snapshot(target, folders=False)
    with pytest.raises(InstallError) as caught:
        adapter.install(release(1), target, ROUTING)
    assert "reef.config.toml" in caught.value.message and "skills/fix-bugs/" in caught.value.message
    assert snapshot(target, folders=False) == before


def test_invalid_tree_is_refused(adapter: CodexAdapter, tmp_path: Path) -> None:
    bad = tree("r", extra={"skills/x/SKILL.md": "no frontmatter\n"})
    with pytest.raises(TreeError):
        adapter.install(release(1, bad), tmp_path / "t", ROUTING)
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").iterdir())


def test_install_release_records_the_install(
    chain: str, adapter: CodexAdapter, tmp_path: Path, monkeypatch: Any
) -> None:
    from reef_cli.core import installs

    monkeypatch.setattr("adapters.codex.adapter.CodexAdapter.__init__", _init_with(adapter))
    target = tmp_path / "codex-home"
    install_release("codex", chain, ROUTING, "1", target)
    assert installs.installed_release(chain) == 1
    assert CodexAdapter().installed(target)["release"] == 1  # type: ignore[index]
    uninstall("codex", target)
    assert not target.exists() or not any(target.iterdir())


def _init_with(adapter: CodexAdapter) -> Any:
    def init(self: CodexAdapter, binary: str | None = None, model: str | None = None) -> None:
        self.binary = adapter.binary
        self.model = model or adapter.model

    return init


# ---------------------------------------------------------------- the binary


def test_version_parsing() -> None:
    assert parse_version("codex-cli 0.171.0") == (0, 171, 0)
    assert parse_version("codex-cli 0.171.12\n") == (0, 171, 12)
    assert parse_version("codex-cli") is None


@pytest.mark.parametrize("version", ["codex-cli 0.170.9", "codex-cli 1.0.0", "codex-cli 2.3.4"])
def test_unsupported_versions_are_refused(tmp_path: Path, version: str) -> None:
    codex = CodexAdapter(binary=fake_codex(tmp_path / "bin", version))
    with pytest.raises(CodexUnsupported) as caught:
        codex.agent_version()
    assert "is not supported" in caught.value.message and "0.171" in caught.value.one_line()
    with pytest.raises(CodexUnsupported):
        codex.install(release(1), tmp_path / "t", ROUTING)
    assert not (tmp_path / "t").exists()


def test_garbage_version_and_missing_binary(tmp_path: Path, monkeypatch: Any) -> None:
    with pytest.raises(CodexUnsupported) as caught:
        CodexAdapter(binary=fake_codex(tmp_path / "bin", "hello")).agent_version()
    assert "not a Codex CLI version" in caught.value.message
    monkeypatch.setenv("REEF_TOOLS_BIN", str(tmp_path / "none"))
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    with pytest.raises(CodexNotFound) as missing:
        CodexAdapter().agent_version()
    assert (
        "not installed" in missing.value.message and "install_agents.sh" in missing.value.one_line()
    )
    assert CodexAdapter(binary=fake_codex(tmp_path / "ok")).agent_version() == "0.171.0"


# ---------------------------------------------------------------- wrapper / headless


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], ["-p", "reef"]),
        (["fix the bug"], ["-p", "reef", "fix the bug"]),
        (["-m", "exec", "hi"], ["-p", "reef", "-m", "exec", "hi"]),  # a model named exec
        (["exec", "--json", "hi"], ["-p", "reef", "exec", "--json", "hi"]),
        (["resume", "--last"], ["-p", "reef", "resume", "--last"]),
        (["login", "status"], ["login", "status"]),  # codex refuses -p there
        (["-c", "x=1", "doctor"], ["-c", "x=1", "doctor"]),
        (["features", "list"], ["features", "list"]),
        (["-p", "mine", "hi"], ["-p", "mine", "hi"]),  # the person chose a profile
        (["--profile=mine"], ["--profile=mine"]),
    ],
)
def test_profile_is_added_where_codex_takes_it(argv: list[str], expected: list[str]) -> None:
    assert headless.with_profile(argv) == expected


def test_wrapper_routes_codex_through_reef(
    adapter: CodexAdapter, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("REEF_TOKEN", "tok-1")
    argv, env = adapter.wrapper(tmp_path / "codex-home", ROUTING, ["exec", "hi"])
    assert argv == [adapter.binary, "-p", "reef", "exec", "hi"]
    assert env["CODEX_HOME"] == str(tmp_path / "codex-home")
    assert env["REEF_TOKEN"] == "tok-1"
    _, again = adapter.wrapper(tmp_path / "codex-home", ROUTING, [])
    assert env["REEF_SESSION_ID"] and again["REEF_SESSION_ID"] != env["REEF_SESSION_ID"]
    monkeypatch.delenv("REEF_TOKEN")
    _, open_env = adapter.wrapper(tmp_path / "codex-home", ROUTING, [])
    assert open_env["REEF_TOKEN"] == headless.NO_TOKEN  # Codex refuses an unset env_key


def test_run_headless_installs_runs_and_times_out(tmp_path: Path) -> None:
    from adapters.base import Gateway

    binary = fake_codex(tmp_path / "bin", sleep=30)
    work = tmp_path / "work"
    work.mkdir()
    seen: dict[str, Any] = {}

    def launch(argv: list[str], workdir: Path, env: dict[str, str], timeout: float) -> Any:
        from adapters._process import local_launch

        seen.update(argv=argv, env=env)
        return local_launch(argv, workdir, env, timeout)

    gateway = Gateway("http://127.0.0.1:9", "demo", "tok-g", model="m-1")
    started = datetime.now(UTC)
    done = CodexAdapter(binary=binary).run_headless(
        tree("r"), "-fix it", work, gateway, launch=launch, timeout=1
    )
    assert done.returncode == 124 and done.timed_out and "did not finish within 1s" in done.stderr
    assert (datetime.now(UTC) - started).total_seconds() < 15
    assert seen["argv"][:4] == [binary, "exec", "-p", "reef"] and seen["argv"][-2:] == [
        "--",
        "-fix it",
    ]
    assert "--skip-git-repo-check" in seen["argv"]
    # a Launch isolates the run: Codex's own sandbox (which does not nest) is off
    assert "--dangerously-bypass-approvals-and-sandbox" in seen["argv"]
    assert "workspace-write" not in seen["argv"]
    assert headless.exec_argv("codex", "hi", isolated=False)[-4:] == [
        "--sandbox",
        "workspace-write",
        "--",
        "hi",
    ]
    env = seen["env"]
    assert env["CODEX_HOME"] == str(work / ".reef-agent") and env["REEF_TOKEN"] == "tok-g"
    assert done.session_id == env["REEF_SESSION_ID"] and done.session is None
    assert set(env) >= {"PATH", "LANG"}
    assert env["TMPDIR"] == str(work / ".reef-agent" / headless.TMP_DIR)  # not under /tmp
    assert "tok-g" not in (work / ".reef-agent" / profile.REL).read_text()  # env only
    data = read_profile(work / ".reef-agent")
    assert data["model"] == "m-1"
    assert "x-reef-release-id" not in data["model_providers"]["reef"]["http_headers"]


# ---------------------------------------------------------------- the hook


def run_hook(event: str, config: Path, payload: dict[str, Any], monkeypatch: Any) -> Any:
    return hook_output(hook.main, event, config, payload, monkeypatch)


def test_hook_versions_list_show_install(
    chain: str, adapter: CodexAdapter, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr("adapters.codex.adapter.CodexAdapter.__init__", _init_with(adapter))
    target = tmp_path / "codex-home"
    install_release("codex", chain, ROUTING, "1", target)
    config = target / render.HOOK_CONFIG

    start = run_hook("session-start", config, {"source": "startup"}, monkeypatch)
    assert start["systemMessage"] == "Reef r1 installed — r2 available ($versions 2 install)"
    context = start["hookSpecificOutput"]["additionalContext"]
    assert 'Reef manages this Codex harness: scenario "demo", r1 installed' in context

    listing = run_hook("user-prompt-submit", config, {"prompt": "$versions"}, monkeypatch)
    assert listing["decision"] == "block"
    assert "installed r1, latest r2" in listing["reason"] and "add rule two" in listing["reason"]
    assert "$versions N install installs it" in listing["reason"]
    assert "/versions" not in listing["reason"]

    shown = run_hook("user-prompt-submit", config, {"prompt": "/versions r2"}, monkeypatch)
    assert "why: add rule two" in shown["reason"] and "+Rule two (rule-r2)." in shown["reason"]
    assert "$versions 2 install installs it here" in shown["reason"]

    done = run_hook("user-prompt-submit", config, {"prompt": "$versions 2 install"}, monkeypatch)
    assert "Installed r2" in done["reason"]
    assert "rule-r2" in (target / "AGENTS.md").read_text()
    assert read_profile(target)["model"] == "fake-model"  # the installed model is kept
    again = run_hook("user-prompt-submit", config, {"prompt": "$versions 2 install"}, monkeypatch)
    assert "already installed" in again["reason"]
    quiet = run_hook("session-start", config, {"source": "startup"}, monkeypatch)
    assert "systemMessage" not in quiet

    bad = run_hook("user-prompt-submit", config, {"prompt": "$versions 2 frob"}, monkeypatch)
    assert bad["decision"] == "block" and "Usage: $versions" in bad["reason"]
    missing = run_hook("user-prompt-submit", config, {"prompt": "$versions 7"}, monkeypatch)
    assert "release r7 does not exist" in missing["reason"]
    for prompt in ("fix the bug", "$versionsx", "use $versions later"):
        assert run_hook("user-prompt-submit", config, {"prompt": prompt}, monkeypatch) is None


def test_parse_versions_prompts() -> None:
    assert versions.parse("$versions") == versions.Request("list")
    assert versions.parse(" /versions 3 ") == versions.Request("show", "3")
    assert versions.parse("$versions r3 INSTALL") == versions.Request("install", "r3")
    assert versions.parse("hello $versions") is None
    with pytest.raises(versions.UsageError) as caught:
        versions.parse("$versions install")
    assert "$versions install" in caught.value.message and caught.value.hint == versions.USAGE


def test_hook_command_without_any_reef_still_blocks_versions(tmp_path: Path) -> None:
    """The exact command from the profile, as Codex runs it (``$SHELL -lc``), with no
    `reef` anywhere: ``$versions`` is blocked with what is wrong, other prompts pass."""
    command = render.hook_command(
        "user-prompt-submit", tmp_path / ".reef/hook.json", str(tmp_path / "gone/reef")
    )
    bash = shutil.which("bash") or "/bin/sh"

    def run(prompt: str) -> str:
        done = subprocess.run(
            [bash, "-lc", command],
            input=json.dumps(
                {"hook_event_name": "UserPromptSubmit", "prompt": prompt}, separators=(",", ":")
            ),
            capture_output=True,
            text=True,
            timeout=30,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    blocked = json.loads(run("$versions"))
    assert blocked["decision"] == "block" and "cannot find the `reef` command" in blocked["reason"]
    assert str(tmp_path / "gone/reef") in blocked["reason"]
    assert json.loads(run("/versions 2"))["decision"] == "block"
    assert run("fix the bug") == ""
    start = render.hook_command("session-start", tmp_path / ".reef/hook.json", "")
    done = subprocess.run(
        [bash, "-lc", start],
        input="{}",
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert "cannot find the `reef` command" in json.loads(done.stdout)["systemMessage"]


def test_trusted_hash_matches_what_codex_computed() -> None:
    """A vector from the real Codex 0.171.0: this hook, trusted with this hash in a
    profile, ran; with any other hash it did not (docs/adapters-codex.md)."""
    assert profile.trusted_hash("UserPromptSubmit", "/work/scratch/hook.sh", timeout=10) == (
        "sha256:5876328db537f69d08dfac8ca0d97649a0928ba73bd126d569488339f50b7dc1"
    )
    assert profile.trusted_hash("SessionStart", "/work/scratch/hook.sh", timeout=10) == (
        "sha256:1690babe58422c4e2575bcac85d9f295f0a07f5e0d7569414d3f0b7d05d2c161"
    )


# ---------------------------------------------------------------- harvest


def place(codex_home: Path, name: str) -> Path:
    text = (FIXTURES / name).read_text()
    meta = json.loads(text.splitlines()[0])["payload"]
    day = meta["timestamp"][:10].replace("-", "/")
    path = (
        codex_home
        / "sessions"
        / day
        / f"rollout-{meta['timestamp'][:19].replace(':', '-')}-{meta['id']}.jsonl"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_parse_real_rollout_with_a_skill_and_a_tool_call() -> None:
    session = harvest_mod.parse_rollout(FIXTURES / "exec-tool-and-skill.jsonl")
    assert session.agent == "codex" and session.session_id == FIXTURE_SESSION
    assert session.cwd == "/home/person/project" and session.model == "fake-model"
    assert session.started_at == "2026-12-01T17:16:30.119Z"
    assert session.ended_at and session.ended_at > session.started_at
    assert session.skills_used == ["bisect-regressions"]
    assert [t.role for t in session.turns] == ["user", "assistant", "tool", "assistant"]
    user, call, output, answer = session.turns
    assert (
        user.text == "Use $bisect-regressions to check the parser test"
    )  # injected context left out
    assert call.text == "I will run the test first."
    assert [c.name for c in call.tool_calls] == ["exec_command"]
    assert call.tool_calls[0].arguments == {"cmd": "printf 'ok\\n' > result.txt && cat result.txt"}
    assert "Process exited with code 0" in output.text and output.text.endswith("ok\n")
    assert answer.text == "The test passes; result.txt says ok." and answer.model == "fake-model"
    assert all(t.timestamp for t in session.turns)


def test_harvest_links_receipts_skips_blocked_and_filters(tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    real = place(home, "exec-tool-and-skill.jsonl")
    place(home, "versions-blocked.jsonl")  # a blocked $versions: no turns, skipped
    broken = home / "sessions/2026/12/02" / f"rollout-2026-12-02T10-00-00-{OTHER_SESSION}.jsonl"
    broken.parent.mkdir(parents=True)
    broken.write_text(
        '{"timestamp":"2026-12-02T10:00:00Z","type":"session_meta","payload":{"id":'
        f'"{OTHER_SESSION}","cwd":"/elsewhere"}}}}\n'
        '{"timestamp":"2026-12-02T10:00:01Z","type":"response_item","payload":{"type":"message",'
        '"role":"user","content":[{"type":"input_text","text":"hi"}]}}\n'
        '{"timestamp":"2026-12-02T10:00:02Z","type":"response_item","payload":{"ty'  # cut short
    )
    store = SQLiteStore(tmp_path / "records.sqlite3")

    def rec(rid: str, when: str, session: str | None, request: Any) -> Record:
        return Record(
            rid, "demo", "responses", "openai", session_id=session, request=request, created_at=when
        )

    named = {
        "prompt_cache_key": FIXTURE_SESSION,
        "client_metadata": {"session_id": FIXTURE_SESSION},
    }
    store.insert(rec("rec_1", "2026-12-01T17:16:30.300000Z", "reef-sid-1", named))
    store.insert(
        rec(
            "rec_2",
            "2026-12-01T17:16:30.400000Z",
            "reef-sid-1",
            {"prompt_cache_key": FIXTURE_SESSION},
        )
    )
    store.insert(rec("rec_old", "2026-11-30T00:00:00.000000Z", "x", named))  # before the session
    store.insert(
        rec("rec_other", "2026-12-01T17:16:31.000000Z", "reef-sid-2", {"prompt_cache_key": "other"})
    )
    store.insert(rec("rec_3", "2026-12-02T10:00:01.500000Z", OTHER_SESSION, {}))

    sessions = CodexAdapter().harvest(home, store=store)
    assert [s.session_id for s in sessions] == [
        FIXTURE_SESSION,
        OTHER_SESSION,
    ]
    assert sessions[0].receipts == ["rec_1", "rec_2"]
    assert sessions[0].reef_session_id == "reef-sid-1"  # type: ignore[attr-defined]
    assert sessions[1].receipts == ["rec_3"]  # filed under Codex's own session id
    assert [t.text for t in sessions[1].turns] == ["hi"]

    os.utime(real, (0, 0))  # not touched since: skipped without reading it
    written = datetime(2026, 12, 2, 10, 0, 2, tzinfo=UTC).timestamp()
    os.utime(broken, (written, written))
    later = CodexAdapter().harvest(home, since=datetime(2026, 12, 2, tzinfo=UTC), store=store)
    assert [s.session_id for s in later] == [OTHER_SESSION]
    naive = CodexAdapter().harvest(home, since=datetime(2026, 12, 2, 10, 0, 5), store=store)
    assert naive == []  # a naive moment is UTC; the broken session ended at 10:00:01
    assert CodexAdapter().harvest(tmp_path / "nothing") == []

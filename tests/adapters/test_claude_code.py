"""Claude Code adapter without the agent running: rendering, merging, the hook, harvest,
the wrapper and every refusal. A stand-in ``claude`` script answers ``--version``; the
real binary runs in tests/e2e/test_claude_code.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from adapters._binary import AgentNotFound, AgentVersionUnsupported
from adapters._files import InstallError
from adapters._install import install_release, uninstall
from adapters.base import Routing
from adapters.claude_code import harvest as harvest_mod
from adapters.claude_code import hook, settings_json, versions
from adapters.claude_code.adapter import ClaudeCodeAdapter
from reef_cli.core import scenarios
from reef_cli.core.errors import ReefError, TreeError
from reef_cli.core.publishing import publish_files
from tests.adapters.helpers import fake_agent, hook_output, release, snapshot, tree

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude_code"
ROUTING = Routing(base_url="http://127.0.0.1:8901", scenario="demo")


def fake_claude(folder: Path, version: str = "2.1.332", sleep: float = 0) -> str:
    return fake_agent(folder, "claude", f"{version} (Claude Code)", then=f"sleep {sleep}\necho ran")


@pytest.fixture
def adapter(tmp_path: Path) -> ClaudeCodeAdapter:
    return ClaudeCodeAdapter(binary=fake_claude(tmp_path / "bin"))


@pytest.fixture
def chain(reef_home: Path) -> str:
    scenarios.create("demo")
    publish_files("demo", tree("Rule one (rule-r1)."), reason="first")
    publish_files("demo", tree("Rule one (rule-r1).\nRule two (rule-r2)."), reason="add rule two")
    return "demo"


# ---------------------------------------------------------------- install / uninstall


def test_install_renders_rules_skills_commands_hooks(
    adapter: ClaudeCodeAdapter, tmp_path: Path, reef_home: Path
) -> None:
    target = tmp_path / "cfg"
    files = tree("Rule (rule-x).", extra={"extensions/notify.ts": "export default 1;\n"})
    adapter.install(release(1, files), target, ROUTING)

    claude_md = (target / "CLAUDE.md").read_text()
    assert "<!-- reef:begin" in claude_md and "Rule (rule-x)." in claude_md
    assert 'scenario "demo", release r1' in claude_md
    assert (target / "skills/fix-bugs/SKILL.md").read_text() == files["skills/fix-bugs/SKILL.md"]
    assert (target / "skills/fix-bugs/checklist.md").exists()
    assert (target / "commands/review.md").read_text() == files["commands/review.md"]
    versions_md = (target / "commands/versions.md").read_text()
    assert "disable-model-invocation: true" in versions_md
    assert not (target / "extensions").exists() and not (target / "reef.toml").exists()

    hooks = settings_json.reef_commands((target / "settings.json").read_text())
    assert set(hooks) == {"SessionStart", "UserPromptSubmit"}
    # `reef hook …`, with `reef` resolved when the hook runs (not an interpreter path)
    assert " hook claude-code session-start --config " in hooks["SessionStart"][0]
    assert "python" not in hooks["SessionStart"][0]
    config = json.loads((target / ".reef/hook.json").read_text())
    assert config["reef_command"] == str(Path(sys.executable).parent / "reef")
    assert config["scenario"] == "demo" and config["target"] == str(target)
    assert config["reef_home"] == str(reef_home.absolute())

    record = adapter.installed(target)
    assert record is not None
    assert record["release"] == 1 and record["scenario"] == "demo"
    assert record["skipped"] == ["extensions/notify.ts"]  # pi only: said so, not installed
    assert record["layout"] == "config-dir" and record["agent_version"] == "2.1.332"


def test_reinstall_replaces_reef_parts_and_uninstall_restores_bytes(
    adapter: ClaudeCodeAdapter, tmp_path: Path
) -> None:
    target = tmp_path / "cfg"
    target.mkdir()
    mine_md = b"# Mine\r\n\r\nkeep CRLF and \xc3\xa9\n"
    mine_settings = (
        b'{"hooks": {"SessionStart": [{"matcher": "startup", "hooks": '
        b'[{"type": "command", "command": "echo mine"}]}]}, "x": 1}'
    )
    (target / "CLAUDE.md").write_bytes(mine_md)
    (target / "settings.json").write_bytes(mine_settings)
    before = snapshot(target)

    adapter.install(release(1), target, ROUTING)
    adapter.install(release(2, tree("Second (rule-2).")), target, ROUTING)
    text = (target / "CLAUDE.md").read_text()
    assert text.count("<!-- reef:begin") == 1 and "rule-2" in text and "rule-x" not in text
    data = json.loads((target / "settings.json").read_text())
    assert data["x"] == 1
    start = data["hooks"]["SessionStart"]
    assert start[0] == {
        "matcher": "startup",
        "hooks": [{"type": "command", "command": "echo mine"}],
    }
    assert len(start) == 2  # the person's group, then exactly one of Reef's

    adapter.uninstall(target)
    assert snapshot(target) == before


def test_uninstall_keeps_edits_made_after_install(
    adapter: ClaudeCodeAdapter, tmp_path: Path
) -> None:
    target = tmp_path / "cfg"
    adapter.install(release(1), target, ROUTING)
    with (target / "CLAUDE.md").open("a") as handle:
        handle.write("\nMy later note.\n")
    data = json.loads((target / "settings.json").read_text())
    data["theme"] = "dark"
    (target / "settings.json").write_text(json.dumps(data))

    adapter.uninstall(target)
    assert (target / "CLAUDE.md").read_text().strip() == "My later note."
    assert json.loads((target / "settings.json").read_text()) == {"theme": "dark"}
    assert not (target / "skills").exists() and not (target / ".reef").exists()


def test_settings_merge_is_idempotent_and_reversible() -> None:
    mine = {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "a"}]}]}}
    commands = {"UserPromptSubmit": "py -m adapters.claude_code.hook user-prompt-submit"}
    once = settings_json.merged(json.dumps(mine), commands)
    twice = settings_json.merged(once, commands)
    assert once == twice
    assert json.loads(settings_json.unmerged(twice) or "{}") == mine
    assert settings_json.unmerged(settings_json.merged(None, commands)) is None


@pytest.mark.parametrize(
    "text, problem",
    [
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "must hold a JSON object"),
        ('{"hooks": []}', '"hooks" must be an object'),
        ('{"hooks": {"SessionStart": {}}}', 'hooks["SessionStart"] must be a list'),
    ],
)
def test_corrupt_settings_json_is_refused_and_nothing_written(
    adapter: ClaudeCodeAdapter, tmp_path: Path, text: str, problem: str
) -> None:
    target = tmp_path / "cfg"
    target.mkdir()
    (target / "settings.json").write_text(text)
    (target / "CLAUDE.md").write_text("mine\n")
    before = snapshot(target)
    with pytest.raises(InstallError) as caught:
        adapter.install(release(), target, ROUTING)
    assert problem in caught.value.message and "nothing was installed" in caught.value.message
    assert caught.value.hint and "settings.json" in caught.value.hint
    assert snapshot(target) == before


def test_missing_binary_is_a_clear_error(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("REEF_TOOLS_BIN", str(tmp_path / "no-tools"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    target = tmp_path / "cfg"
    with pytest.raises(AgentNotFound) as caught:
        ClaudeCodeAdapter().install(release(), target, ROUTING)
    assert "Claude Code is not installed" in caught.value.message
    assert caught.value.hint and "install_agents.sh" in caught.value.hint
    with pytest.raises(AgentNotFound):
        ClaudeCodeAdapter().wrapper(target, ROUTING, [])
    assert not target.exists()


@pytest.mark.parametrize("version", ["2.0.77", "3.0.1", "1.0.0"])
def test_unsupported_version_is_refused(tmp_path: Path, version: str) -> None:
    binary = fake_claude(tmp_path / version, version=version)
    target = tmp_path / "cfg"
    with pytest.raises(AgentVersionUnsupported) as caught:
        ClaudeCodeAdapter(binary=binary).install(release(), target, ROUTING)
    assert (
        f"Claude Code {version}" in caught.value.message and "not supported" in caught.value.message
    )
    assert caught.value.hint and "2.1.332" in caught.value.hint
    assert not target.exists()


def test_target_under_a_regular_file_is_not_writable(
    adapter: ClaudeCodeAdapter, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(InstallError) as caught:
        adapter.install(release(), blocker / "cfg", ROUTING)
    assert "is not a writable directory" in caught.value.message
    assert blocker.read_text() == "x"


def test_immutable_target_is_not_writable(adapter: ClaudeCodeAdapter, tmp_path: Path) -> None:
    """Root ignores permission bits, so use the immutable attribute (chattr +i)."""
    target = tmp_path / "cfg"
    target.mkdir()
    (target / "CLAUDE.md").write_text("mine\n")
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.skip("chattr is not installed")
    done = subprocess.run([chattr, "+i", str(target)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"this filesystem does not support chattr +i: {done.stderr.strip()}")
    try:
        before = snapshot(target)
        with pytest.raises(InstallError) as caught:
            adapter.install(release(), target, ROUTING)
        assert "nothing was installed" in caught.value.message
        assert snapshot(target) == before
    finally:
        subprocess.run([chattr, "-i", str(target)], check=True)


def test_failure_mid_install_rolls_back_every_file(
    adapter: ClaudeCodeAdapter, tmp_path: Path
) -> None:
    """``commands`` is a regular file: writing commands/review.md fails after skills/ was
    written; the rollback leaves the person's files exactly as they were."""
    target = tmp_path / "cfg"
    target.mkdir()
    (target / "commands").write_text("not a folder\n")
    (target / "CLAUDE.md").write_text("mine\n")
    before = {k: v for k, v in snapshot(target).items() if v is not None}
    with pytest.raises(OSError):
        adapter.install(release(), target, ROUTING)
    after = {k: v for k, v in snapshot(target).items() if v is not None}
    assert after == before
    assert adapter.installed(target) is None


def test_refuses_to_overwrite_the_person_s_own_skill(
    adapter: ClaudeCodeAdapter, tmp_path: Path
) -> None:
    target = tmp_path / "cfg"
    (target / "skills/fix-bugs").mkdir(parents=True)
    (target / "skills/fix-bugs/SKILL.md").write_text("my own skill\n")
    with pytest.raises(InstallError) as caught:
        adapter.install(release(), target, ROUTING)
    assert "would overwrite your own skills/fix-bugs/SKILL.md" in caught.value.message
    assert (target / "skills/fix-bugs/SKILL.md").read_text() == "my own skill\n"
    assert not (target / "CLAUDE.md").exists()


def test_a_tree_command_named_versions_is_refused(
    adapter: ClaudeCodeAdapter, tmp_path: Path
) -> None:
    files = tree("r", extra={"commands/versions.md": "---\ndescription: x\n---\nx\n"})
    with pytest.raises(InstallError, match=r"Reef's\s+/versions"):
        adapter.install(release(1, files), tmp_path / "cfg", ROUTING)


def test_invalid_tree_is_refused(adapter: ClaudeCodeAdapter, tmp_path: Path) -> None:
    with pytest.raises(TreeError):
        adapter.install(release(1, {"skills/Bad Name/SKILL.md": "x"}), tmp_path / "c", ROUTING)
    assert not (tmp_path / "c").exists()


# ---------------------------------------------------------------- the hook


def run_hook(event: str, config: Path, payload: dict[str, Any], monkeypatch: Any) -> Any:
    return hook_output(hook.main, event, config, payload, monkeypatch)


def test_hook_versions_list_show_install(
    adapter: ClaudeCodeAdapter, chain: str, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr(
        ClaudeCodeAdapter,
        "__init__",
        lambda self, binary=None: setattr(self, "binary", adapter.binary),
    )
    target = tmp_path / "cfg"
    install_release("claude-code", chain, ROUTING, "1", target)
    config = target / ".reef/hook.json"

    start = run_hook("session-start", config, {"source": "startup"}, monkeypatch)
    assert start is not None
    assert start["systemMessage"] == "Reef r1 installed — r2 available (/versions 2 install)"
    assert 'scenario "demo", r1 installed' in start["hookSpecificOutput"]["additionalContext"]

    listing = run_hook("user-prompt-submit", config, {"prompt": "/versions"}, monkeypatch)
    assert listing is not None and listing["decision"] == "block"
    assert "installed r1, latest r2" in listing["reason"] and "add rule two" in listing["reason"]

    shown = run_hook("user-prompt-submit", config, {"prompt": "/versions r2"}, monkeypatch)
    assert shown is not None
    assert "why: add rule two" in shown["reason"] and "+Rule two (rule-r2)." in shown["reason"]

    done = run_hook("user-prompt-submit", config, {"prompt": "/versions 2 install"}, monkeypatch)
    assert done is not None and "Installed r2" in done["reason"]
    assert "rule-r2" in (target / "CLAUDE.md").read_text()
    again = run_hook("user-prompt-submit", config, {"prompt": "/versions 2 install"}, monkeypatch)
    assert again is not None and "already installed" in again["reason"]

    quiet = run_hook("session-start", config, {"source": "startup"}, monkeypatch)
    assert quiet is not None and "systemMessage" not in quiet

    bad = run_hook("user-prompt-submit", config, {"prompt": "/versions 2 frobnicate"}, monkeypatch)
    assert bad is not None and bad["decision"] == "block" and "Usage: /versions" in bad["reason"]
    missing = run_hook("user-prompt-submit", config, {"prompt": "/versions 7"}, monkeypatch)
    assert missing is not None and "release r7 does not exist" in missing["reason"]

    assert run_hook("user-prompt-submit", config, {"prompt": "fix the bug"}, monkeypatch) is None
    assert run_hook("user-prompt-submit", config, {"prompt": "/versionsx"}, monkeypatch) is None


def test_hook_evolve_files_the_ask_from_the_session(
    chain: str, tmp_path: Path, monkeypatch: Any, reef_home: Path
) -> None:
    """``/evolve <ask>`` (issue 27): the hook files the ask in pi's format, private, with
    Claude Code's session id, and answers before any model call; a refused ask is one line
    and nothing is filed."""
    target = tmp_path / "cfg"
    install_release("claude-code", chain, ROUTING, "1", target)
    assert "disable-model-invocation: true" in (target / "commands/evolve.md").read_text()
    config = target / ".reef/hook.json"
    event = {"prompt": "/evolve  always run the tests first", "session_id": "cc-42", "cwd": "/w"}
    done = run_hook("user-prompt-submit", config, event, monkeypatch)
    assert done is not None and done["decision"] == "block"
    [filed] = sorted((reef_home / "asks").glob("*.json"))
    assert str(filed) in done["reason"] and "reef-claude evolve --filed" in done["reason"]
    assert filed.stat().st_mode & 0o777 == 0o600
    data = json.loads(filed.read_text())
    assert (data["ask"], data["scenario"], data["agent"]) == (
        "always run the tests first",
        "demo",
        "claude-code",
    )
    assert (data["installed_release"], data["reef_session"], data["cwd"]) == (1, "cc-42", "/w")

    usage = run_hook("user-prompt-submit", config, {"prompt": "/evolve"}, monkeypatch)
    assert usage is not None and usage["reason"].startswith("Usage: /evolve")
    key = "gh" + "p_" + "a1B2c3D4e5F6" * 3
    refused = run_hook(
        "user-prompt-submit", config, {"prompt": f"/evolve use the token {key}"}, monkeypatch
    )
    assert refused is not None and refused["reason"].startswith("Reef: ")
    assert key not in refused["reason"]
    assert len(list((reef_home / "asks").glob("*.json"))) == 1  # nothing more was filed
    assert run_hook("user-prompt-submit", config, {"prompt": "/evolved"}, monkeypatch) is None


def test_a_release_with_its_own_evolve_command_is_refused(
    adapter: ClaudeCodeAdapter, tmp_path: Path
) -> None:
    files = tree("r", extra={"commands/evolve.md": "---\ndescription: x\n---\nx\n"})
    with pytest.raises(InstallError, match="Reef's /evolve"):
        adapter.install(release(1, files), tmp_path / "c", ROUTING)


def _fake_binary(adapter: ClaudeCodeAdapter, monkeypatch: Any) -> None:
    """Installs from the hook (``/versions N install``) use the stand-in ``claude``."""
    monkeypatch.setattr(
        ClaudeCodeAdapter,
        "__init__",
        lambda self, binary=None: setattr(self, "binary", adapter.binary),
    )


def test_hook_reload_brings_the_session_onto_a_newer_install(
    adapter: ClaudeCodeAdapter, chain: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """``/reload`` after ``/versions 2 install``: the hook hands the session r2's rules,
    skills and commands as context (the prompt goes on to the model with it); asked again,
    or in a session that started on r2, it says there is nothing new, with no model call."""
    _fake_binary(adapter, monkeypatch)
    target = tmp_path / "cfg"
    install_release("claude-code", chain, ROUTING, "1", target)
    assert "disable-model-invocation: true" in (target / "commands/reload.md").read_text()
    config = target / ".reef/hook.json"
    session = {"session_id": "cc-7", "cwd": "/w"}
    assert run_hook("session-start", config, {**session, "source": "startup"}, monkeypatch)
    same = run_hook("user-prompt-submit", config, {**session, "prompt": "/reload"}, monkeypatch)
    assert same == {
        "decision": "block",
        "reason": 'Reef: r1 of "demo" is installed, the release this session already follows; '
        "nothing to reload.",
    }

    done = run_hook(
        "user-prompt-submit", config, {**session, "prompt": "/versions 2 install"}, monkeypatch
    )
    assert done is not None and "or type /reload to load it into this one" in done["reason"]
    out = run_hook("user-prompt-submit", config, {**session, "prompt": " /reload "}, monkeypatch)
    assert out is not None and "decision" not in out  # the prompt goes on, with the context
    assert out["systemMessage"] == 'Reef: loaded r2 of "demo" into this session (it had r1).'
    assert out["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    context = out["hookSpecificOutput"]["additionalContext"]
    assert context.startswith('Reef /reload: release r2 of Reef scenario "demo" is now installed')
    assert "(this session had r1)" in context and "replaces the harness instructions" in context
    assert 'scenario "demo", release r2' in context  # Reef's section of CLAUDE.md, as is
    assert "Rule one (rule-r1).\nRule two (rule-r2)." in context
    skill = target / "skills/fix-bugs/SKILL.md"
    assert f"- fix-bugs: Reproduce a bug with a failing test first. ({skill})" in context
    assert f"- /review: Review the diff ({target / 'commands/review.md'})" in context
    assert "/versions" not in context and "/evolve" not in context  # Reef's own: not listed
    assert "reef_e2e" not in context and "token" not in context.lower()

    again = run_hook("user-prompt-submit", config, {**session, "prompt": "/reload"}, monkeypatch)
    assert again is not None and again["decision"] == "block"
    assert "r2" in again["reason"] and "nothing to reload" in again["reason"]
    # A session Reef knows nothing of (started before this install of Reef): loaded.
    other = {"session_id": "cc-8", "prompt": "/reload"}
    fresh = run_hook("user-prompt-submit", config, other, monkeypatch)
    assert fresh is not None and "had r" not in fresh["hookSpecificOutput"]["additionalContext"]
    # A new session reads CLAUDE.md itself: nothing to reload.
    run_hook("session-start", config, {"session_id": "cc-9", "source": "startup"}, monkeypatch)
    new = {"session_id": "cc-9", "prompt": "/reload"}
    assert "nothing to reload" in run_hook("user-prompt-submit", config, new, monkeypatch)["reason"]
    # After a compaction what the session holds is unknown: the next /reload loads it.
    run_hook("session-start", config, {"session_id": "cc-9", "source": "compact"}, monkeypatch)
    compacted = run_hook("user-prompt-submit", config, new, monkeypatch)
    assert compacted is not None and "decision" not in compacted

    usage = run_hook("user-prompt-submit", config, {**session, "prompt": "/reload 3"}, monkeypatch)
    assert usage is not None and usage["reason"].startswith("Usage: /reload")
    assert run_hook("user-prompt-submit", config, {"prompt": "/reloaded"}, monkeypatch) is None
    assert sorted(p.name for p in (target / ".reef/sessions").iterdir()) == [
        "cc-7.json",
        "cc-8.json",
        "cc-9.json",
    ]
    uninstall("claude-code", target)
    assert not (target / ".reef").exists()


def test_hook_reload_never_hands_a_secret_to_the_model(
    chain: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """The gate keeps credentials out of releases; a key pasted into Reef's section of
    CLAUDE.md afterwards is still refused by /reload, named by rule, never quoted."""
    target = tmp_path / "cfg"
    install_release("claude-code", chain, ROUTING, "2", target)
    key = "gh" + "p_" + "a1B2c3D4e5F6" * 3
    claude_md = target / "CLAUDE.md"
    claude_md.write_text(claude_md.read_text().replace("Rule two", f"Use {key} for"))
    event = {"session_id": "cc-1", "prompt": "/reload"}
    out = run_hook("user-prompt-submit", tmp_path / "cfg/.reef/hook.json", event, monkeypatch)
    assert out is not None and out["decision"] == "block"
    assert out["reason"].startswith("Reef: the installed release holds what looks like a secret")
    assert key not in json.dumps(out)
    assert not (target / ".reef/sessions/cc-1.json").exists()  # nothing was loaded


def test_hook_reload_points_to_rules_too_long_to_quote(
    chain: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """Claude Code may cut a hook's context at 8000 characters: long rules are named by
    file and release instead of being quoted (and cut)."""
    long_rules = "\n".join(f"Rule {n}: keep functions short (rule-long-{n})." for n in range(300))
    publish_files("demo", tree(long_rules), reason="many rules")
    target = tmp_path / "cfg"
    install_release("claude-code", chain, ROUTING, "3", target)
    event = {"session_id": "cc-2", "prompt": "/reload"}
    out = run_hook("user-prompt-submit", target / ".reef/hook.json", event, monkeypatch)
    context = out["hookSpecificOutput"]["additionalContext"]
    assert len(context) < 8000 and context.count("\n") < 200
    assert "rule-long-" not in context and "too long to quote" in context
    assert str(target / "CLAUDE.md") in context and "release r3" in context
    assert "- fix-bugs: Reproduce a bug" in context


def test_a_release_with_its_own_reload_command_is_refused(
    adapter: ClaudeCodeAdapter, tmp_path: Path
) -> None:
    files = tree("r", extra={"commands/reload.md": "---\ndescription: x\n---\nx\n"})
    with pytest.raises(InstallError, match="Reef's /reload"):
        adapter.install(release(1, files), tmp_path / "c", ROUTING)


def test_hook_command_runs_as_claude_code_would(
    adapter: ClaudeCodeAdapter, chain: str, tmp_path: Path
) -> None:
    """The exact command from settings.json, through a shell, from an unrelated cwd."""
    target = tmp_path / "cfg"
    install_release("claude-code", chain, ROUTING, "2", target)
    command = settings_json.reef_commands((target / "settings.json").read_text())
    project = tmp_path / "project"
    (project / "adapters").mkdir(parents=True)  # a project's own package must not shadow Reef's
    (project / "adapters" / "__init__.py").write_text("raise SystemExit('shadowed')\n")
    done = subprocess.run(
        command["UserPromptSubmit"][0],
        shell=True,
        cwd=project,
        input=json.dumps({"prompt": "/versions"}),
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": os.environ["PATH"]},
    )
    assert done.returncode == 0, done.stderr
    assert "installed r2, latest r2" in json.loads(done.stdout)["reason"]


def test_parse_versions_commands() -> None:
    assert versions.parse("hello /versions") is None
    assert versions.parse("/versions") == versions.Request("list")
    assert versions.parse("  /versions 3 ") == versions.Request("show", "3")
    assert versions.parse("/versions r3 INSTALL") == versions.Request("install", "r3")
    with pytest.raises(ReefError):
        versions.parse("/versions install")
    with pytest.raises(ReefError):
        versions.parse("/versions 1 2 3")


# ---------------------------------------------------------------- wrapper / headless


def test_wrapper_routes_everything_through_reef(
    adapter: ClaudeCodeAdapter, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("REEF_TOKEN", "tok-1")
    monkeypatch.setenv("REEF_SESSION_ID", "sess-9")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-person-real")
    argv, env = adapter.wrapper(tmp_path / "cfg", ROUTING, ["-p", "hi"])
    assert argv == [adapter.binary, "-p", "hi"]
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8901"
    assert env["ANTHROPIC_CUSTOM_HEADERS"] == "x-reef-scenario: demo\nx-reef-session: sess-9"
    assert env["ANTHROPIC_AUTH_TOKEN"] == "tok-1"
    assert env["ANTHROPIC_API_KEY"] == ""  # the person's own key must not leak to Reef
    assert env["CLAUDE_CONFIG_DIR"] == str((tmp_path / "cfg").resolve())
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert env["DISABLE_TELEMETRY"] == env["DISABLE_ERROR_REPORTING"] == "1"
    assert env["DISABLE_AUTOUPDATER"] == "1"

    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "home-cfg"))
    _, project_env = adapter.wrapper(tmp_path / "repo" / ".claude", ROUTING, [])
    assert "CLAUDE_CONFIG_DIR" not in project_env  # project settings load from the cwd


def test_run_headless_times_out_with_code_124(tmp_path: Path) -> None:
    binary = fake_claude(tmp_path / "bin", sleep=30)
    started = datetime.now(UTC)
    done = ClaudeCodeAdapter(binary=binary).run_installed(
        "hi", tmp_path, tmp_path / "cfg", ROUTING, env={"PATH": os.environ["PATH"]}, timeout=1
    )
    assert done.returncode == 124 and "did not finish within 1s" in done.stderr
    assert done.session is None
    assert (datetime.now(UTC) - started).total_seconds() < 15


# ---------------------------------------------------------------- harvest


def place(config_dir: Path, name: str, project: str = "-tmp-reef-fixture-home-project") -> Path:
    folder = config_dir / "projects" / project
    folder.mkdir(parents=True, exist_ok=True)
    text = (FIXTURES / name).read_text()
    session = json.loads(text.splitlines()[0]).get("sessionId")
    path = folder / f"{session}.jsonl"
    path.write_text(text)
    return path


def test_parse_real_transcript_with_skill_and_tool_calls() -> None:
    session = harvest_mod.parse_transcript(FIXTURES / "skill-and-bash.jsonl")
    assert session.agent == "claude-code"
    assert session.session_id == "11111111-2222-4333-8444-555555555555"
    assert session.cwd == "/tmp/reef-fixture/home/project"
    assert session.model == "claude-opus-5-5"
    assert session.skills_used == ["write-tests"]
    assert [t.role for t in session.turns] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert session.turns[0].text == "Add a test for the parser"
    assert [(c.name, c.arguments) for c in session.turns[1].tool_calls] == [
        ("Skill", {"skill": "write-tests"})
    ]
    assert session.turns[3].tool_calls[0].arguments["command"] == "echo ok > made.txt"
    assert session.turns[-1].text == "Done: made.txt written."
    assert session.started_at and session.ended_at and session.started_at < session.ended_at
    json.dumps(session.to_json())  # serialisable as is


def test_harvest_links_receipts_skips_empty_sessions_and_filters(tmp_path: Path) -> None:
    from reef_cli.core.records import Record
    from reef_cli.core.store.sqlite import SQLiteStore

    config_dir = tmp_path / "cfg"
    real = place(config_dir, "skill-and-bash.jsonl")
    place(config_dir, "versions-blocked.jsonl")  # a blocked /versions: no turns, skipped
    broken = config_dir / "projects" / "-x" / "22222222-0000-4000-8000-000000000000.jsonl"
    broken.parent.mkdir(parents=True)
    broken.write_text(
        '{"type": "user", "sessionId": "22222222-0000-4000-8000-000000000000", "timestamp": '
        '"2026-11-30T12:00:00Z", "cwd": "/elsewhere", '
        '"message": {"role": "user", "content": "hi"}}\n'
        '{"type": "assistant", "message": {"id": "m1", "content": [{"type": "te'  # cut short
    )
    store = SQLiteStore(tmp_path / "records.sqlite3")
    store.insert(
        Record(
            id="rec_1",
            scenario="demo",
            client_dialect="anthropic",
            upstream_dialect="openai",
            session_id="11111111-2222-4333-8444-555555555555",
        )
    )
    store.insert(
        Record(
            id="rec_other",
            scenario="demo",
            client_dialect="anthropic",
            upstream_dialect="openai",
            session_id="someone-else",
        )
    )

    sessions = ClaudeCodeAdapter().harvest(config_dir, store=store)
    assert [s.session_id for s in sessions] == [
        "11111111-2222-4333-8444-555555555555",
        "22222222-0000-4000-8000-000000000000",
    ]
    assert sessions[0].receipts == ["rec_1"] and sessions[1].receipts == []
    assert [t.text for t in sessions[1].turns] == ["hi"]

    stamp = datetime(2026, 11, 30, 12, 30, tzinfo=UTC).timestamp()
    for path in (real, broken):
        os.utime(path, (stamp, stamp))
    later = datetime(2026, 11, 30, 11, 50, tzinfo=UTC)  # after the real session ended
    assert [s.session_id for s in ClaudeCodeAdapter().harvest(config_dir, later, store=store)] == [
        "22222222-0000-4000-8000-000000000000"
    ]
    os.utime(real, (0, 0))  # an old file is not even opened when `since` is given
    assert (
        ClaudeCodeAdapter().harvest(config_dir, datetime(2020, 1, 1), store=store)[0].cwd
        == "/elsewhere"
    )


def test_harvest_for_a_project_target_reads_the_person_s_config_dir(
    tmp_path: Path, monkeypatch: Any
) -> None:
    home_cfg = tmp_path / "home-cfg"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home_cfg))
    place(home_cfg, "skill-and-bash.jsonl")
    project = Path("/tmp/reef-fixture/home/project")
    found = ClaudeCodeAdapter().harvest(project / ".claude", store=None)
    assert [s.session_id for s in found] == ["11111111-2222-4333-8444-555555555555"]
    assert ClaudeCodeAdapter().harvest(tmp_path / "other" / ".claude") == []


# ---------------------------------------------------------------- `reef` found at run time


def _moved_reef(tmp_path: Path) -> tuple[Path, Path]:
    """A `reef` at a venv path that is then moved away: (the recorded path, the new one)."""
    real = Path(sys.executable).parent / "reef"
    old = tmp_path / "old-venv" / "bin" / "reef"
    old.parent.mkdir(parents=True)
    old.write_text(f'#!/bin/sh\nexec {real} "$@"\n')
    old.chmod(0o755)
    return old, tmp_path / "moved-venv"


def _path_without_reef() -> str:
    dirs = os.environ["PATH"].split(os.pathsep)
    return os.pathsep.join(d for d in dirs if not (Path(d) / "reef").exists())


def _hook_run(command: str, prompt: str | None, env: dict[str, str], cwd: Path) -> Any:
    done = subprocess.run(
        command,
        shell=True,
        cwd=cwd,
        input=json.dumps({"prompt": prompt} if prompt is not None else {"source": "startup"}),
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else None


def test_hooks_find_reef_at_run_time_when_the_recorded_one_moved(
    adapter: ClaudeCodeAdapter, chain: str, tmp_path: Path, monkeypatch: Any
) -> None:
    from reef_cli.core import launcher

    old, moved = _moved_reef(tmp_path)
    with monkeypatch.context() as patch:
        patch.setattr(launcher, "current_cli", lambda: str(old))
        install_release("claude-code", chain, ROUTING, "2", tmp_path / "cfg")
    commands = settings_json.reef_commands((tmp_path / "cfg" / "settings.json").read_text())
    start, prompt = commands["SessionStart"][0], commands["UserPromptSubmit"][0]
    assert str(old) in prompt
    assert adapter.installed(tmp_path / "cfg")["reef_command"] == str(old)  # type: ignore[index]
    work = tmp_path / "project"
    work.mkdir()
    real = Path(sys.executable).parent / "reef"
    bare = {"PATH": _path_without_reef()}

    # Installed as recorded: it answers.
    assert "installed r2" in _hook_run(prompt, "/versions", bare, work)["reason"]

    old.parent.parent.rename(moved)  # the venv moved
    # `reef` on PATH (a rebuilt venv) or the one a wrapper passes in $REEF_CLI: it answers.
    on_path = {"PATH": f"{real.parent}{os.pathsep}{bare['PATH']}"}
    assert "installed r2" in _hook_run(prompt, "/versions", on_path, work)["reason"]
    assert (
        "installed r2"
        in _hook_run(prompt, "/versions", {**bare, "REEF_CLI": str(real)}, work)["reason"]
    )
    # No `reef` anywhere: /versions is still blocked (never reaches the model) and says why;
    # the session start says it too; other prompts go on untouched.
    blocked = _hook_run(prompt, "/versions 2", bare, work)
    assert blocked["decision"] == "block"
    assert blocked["reason"].startswith("Reef: cannot find the `reef` command")
    assert str(old) in blocked["reason"] and "reef harness install" in blocked["reason"]
    assert _hook_run(prompt, "/reload", bare, work)["decision"] == "block"
    notice = _hook_run(start, None, bare, work)
    assert notice["systemMessage"].startswith("Reef: cannot find the `reef` command")
    assert _hook_run(prompt, "fix the bug", bare, work) is None

    # `reef doctor` names the stale install and the command that renews it.
    from tests.cli.helpers import reef_json

    rows = [r for r in reef_json("doctor") if r["name"] == "install claude-code"]
    assert len(rows) == 1 and rows[0]["status"] == "warn"
    assert "stale" in rows[0]["detail"] and str(old) in rows[0]["detail"]
    assert rows[0]["fix"].startswith("reef harness install --adapter claude-code -s demo")


def test_old_hook_commands_are_replaced_on_reinstall(tmp_path: Path) -> None:
    """Hooks written before `reef hook` (an interpreter path) are still Reef's."""
    old = {
        "hooks": {
            "SessionStart": [
                {
                    "hooks": [
                        {
                            "type": "command",
                            "command": "PYTHONPATH=/x /gone/python -P -m "
                            "adapters.claude_code.hook session-start --config /c",
                        }
                    ]
                }
            ]
        }
    }
    text = settings_json.merged(json.dumps(old), {"SessionStart": 'R=x; "$R" hook claude-code s'})
    assert settings_json.reef_commands(text) == {"SessionStart": ['R=x; "$R" hook claude-code s']}
    assert settings_json.unmerged(json.dumps(old)) is None


def test_wrapper_sends_the_installed_release_and_this_reef(
    adapter: ClaudeCodeAdapter, chain: str, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("REEF_SESSION_ID", "sess-9")
    target = tmp_path / "cfg"
    install_release("claude-code", chain, ROUTING, "1", target)  # r2 is served
    _, env = adapter.wrapper(target, ROUTING, [])
    assert env["ANTHROPIC_CUSTOM_HEADERS"].splitlines() == [
        "x-reef-scenario: demo",
        "x-reef-session: sess-9",
        "x-reef-release-id: 1",
    ]
    assert env["REEF_CLI"] == str(Path(sys.executable).parent / "reef")
    install_release("claude-code", chain, ROUTING, "2", target)
    _, env = adapter.wrapper(target, ROUTING, [])
    assert "x-reef-release-id: 2" in env["ANTHROPIC_CUSTOM_HEADERS"].splitlines()


def test_versions_lists_proposals_waiting_for_review(chain: str) -> None:
    from adapters.claude_code.versions import list_text

    publish_files(
        "demo", tree("Rule one (rule-r1).\nRule three."), reason="a proposal", hold="review"
    )
    text = list_text("demo", 1)
    assert "Proposals waiting for review:" in text
    assert "r3   held for review: a proposal" in text
    assert "reef harness promote N · reef harness reject N" in text
    assert "Proposals" not in list_text_without_proposals()


def list_text_without_proposals() -> str:
    from adapters.claude_code.versions import list_text
    from reef_cli.core import scenarios as sc

    sc.create("plain")
    publish_files("plain", tree("Rule (rule-p)."), reason="only")
    return list_text("plain", 1)

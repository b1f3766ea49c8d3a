"""opencode adapter without the agent running: rendering, merging the person's config,
uninstall byte for byte, harvest of a real session store, version checks and the wrapper.
A stand-in ``opencode`` script answers ``--version``; the real binary runs in
tests/e2e/test_opencode.py."""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from adapters._binary import AgentNotFound, AgentVersionUnsupported, parse_version
from adapters._files import InstallError
from adapters._install import install_release, uninstall
from adapters.base import Routing
from adapters.opencode import config_json, headless, jsonc
from adapters.opencode import harvest as harvest_mod
from adapters.opencode.adapter import BINARY, NotInstalled, OpenCodeAdapter
from reef_cli.core import scenarios
from reef_cli.core.publishing import publish_files
from tests.adapters.helpers import fake_agent, release, snapshot, tree

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "opencode"
ROUTING = Routing(base_url="http://127.0.0.1:8901", scenario="demo")


def fake_opencode(folder: Path, version: str = "1.18.33") -> str:
    return fake_agent(folder, "opencode", version, then='echo "$@"')


@pytest.fixture
def adapter(tmp_path: Path) -> OpenCodeAdapter:
    return OpenCodeAdapter(binary=fake_opencode(tmp_path / "bin"), models=["m1", "m2"])


def person_dir(tmp_path: Path, *names: str) -> Path:
    """A config dir holding the person's own files (from tests/fixtures/opencode)."""
    target = tmp_path / "cfg"
    target.mkdir()
    for name in names:
        shutil.copy(FIXTURES / name, target / name)
    return target


# ---------------------------------------------------------------- install / uninstall


def test_install_renders_rules_skills_commands_and_the_provider(
    adapter: OpenCodeAdapter, tmp_path: Path
) -> None:
    target = tmp_path / "cfg"
    files = tree("Rule (rule-x).", extra={"extensions/notify.ts": "export default 1;\n"})
    adapter.install(release(3, files), target, ROUTING)

    agents_md = (target / "AGENTS.md").read_text()
    assert "<!-- reef:begin" in agents_md and "Rule (rule-x)." in agents_md
    assert 'scenario "demo", release r3' in agents_md
    assert (target / "skills/fix-bugs/SKILL.md").read_text() == files["skills/fix-bugs/SKILL.md"]
    assert (target / "skills/fix-bugs/checklist.md").exists()
    assert (target / "commands/review.md").read_text() == files["commands/review.md"]
    assert not (target / "extensions").exists() and not (target / "reef.toml").exists()

    config = json.loads((target / "opencode.json").read_text())
    assert config["model"] == "reef/m1"
    reef = config["provider"]["reef"]
    assert reef["npm"] == "@ai-sdk/openai-compatible"
    assert reef["options"]["baseURL"] == "http://127.0.0.1:8901/v1"
    # secrets and the session are env references opencode fills in, never the values
    assert reef["options"]["apiKey"] == "{env:REEF_TOKEN}"
    assert reef["options"]["headers"] == {
        "x-reef-scenario": "demo",
        "x-reef-session": "{env:REEF_SESSION_ID}",
        "x-reef-release-id": "3",
    }
    assert list(reef["models"]) == ["m1", "m2"]

    record = adapter.installed(target)
    assert record is not None
    assert record["adapter"] == "opencode" and record["release"] == 3
    assert record["skipped"] == ["extensions/notify.ts"]
    assert record["config"] == "opencode.json" and record["agent_version"] == "1.18.33"
    assert record["layout"] == "config-dir" and record["models"] == ["m1", "m2"]


def test_a_trial_candidate_sends_no_release_header(
    adapter: OpenCodeAdapter, tmp_path: Path
) -> None:
    adapter.install(release(0), tmp_path / "cfg", ROUTING)
    headers = json.loads((tmp_path / "cfg/opencode.json").read_text())["provider"]["reef"]
    assert "x-reef-release-id" not in headers["options"]["headers"]


@pytest.mark.parametrize(
    "names",
    [("opencode.jsonc", "AGENTS.md"), ("opencode.json", "AGENTS.md"), ("opencode.jsonc",)],
    ids=["jsonc", "json", "jsonc-only"],
)
def test_uninstall_gives_the_persons_files_back_byte_for_byte(
    adapter: OpenCodeAdapter, tmp_path: Path, names: tuple[str, ...]
) -> None:
    target = person_dir(tmp_path, *names)
    before = snapshot(target)
    adapter.install(release(1), target, ROUTING)

    config_name = names[0]
    merged = (target / config_name).read_text()
    data = jsonc.loads(merged)
    assert data["model"] == "reef/m1" and "reef" in data["provider"]
    theirs = jsonc.loads((FIXTURES / config_name).read_text())
    for name, provider in theirs["provider"].items():
        assert data["provider"][name] == provider  # the person's providers are still there
    if config_name == "opencode.jsonc":
        assert "// My opencode setup" in merged and "trailing comma on purpose" in merged
    assert not (target / "opencode.json").exists() or config_name == "opencode.json"

    adapter.uninstall(target)
    assert snapshot(target) == before


def test_uninstall_after_the_person_edited_keeps_their_edits(
    adapter: OpenCodeAdapter, tmp_path: Path
) -> None:
    target = person_dir(tmp_path, "opencode.jsonc", "AGENTS.md")
    original = (FIXTURES / "opencode.jsonc").read_text()
    adapter.install(release(1), target, ROUTING)
    config = target / "opencode.jsonc"
    config.write_text(config.read_text().replace('"tokyonight"', '"gruvbox"'))
    agents = target / "AGENTS.md"
    agents.write_text("# Added on top\n\n" + agents.read_text())

    adapter.uninstall(target)
    # only Reef's parts went: the provider, and the model is the person's again
    assert config.read_text() == original.replace('"tokyonight"', '"gruvbox"')
    assert agents.read_text() == "# Added on top\n\n" + (FIXTURES / "AGENTS.md").read_text()
    assert not (target / ".reef").exists()


def test_uninstall_keeps_a_model_the_person_chose_since(
    adapter: OpenCodeAdapter, tmp_path: Path
) -> None:
    target = person_dir(tmp_path, "opencode.jsonc")
    adapter.install(release(1), target, ROUTING)
    config = target / "opencode.jsonc"
    config.write_text(config.read_text().replace('"model": "reef/m1"', '"model": "work/big"'))
    adapter.uninstall(target)
    data = jsonc.loads(config.read_text())
    assert data["model"] == "work/big" and "reef" not in data["provider"]
    assert set(data["provider"]) == {"ollama", "work"}


def test_uninstall_of_a_fresh_dir_removes_everything_reef_wrote(
    adapter: OpenCodeAdapter, tmp_path: Path
) -> None:
    target = tmp_path / "cfg"
    adapter.install(release(1), target, ROUTING)
    (target / "opencode.json").write_text(
        (target / "opencode.json").read_text().replace('"reef/m1"', '"reef/m2"')
    )
    adapter.uninstall(target)
    assert snapshot(target) == {}  # the edited config held nothing of the person's


def test_reinstall_replaces_only_reefs_parts(adapter: OpenCodeAdapter, tmp_path: Path) -> None:
    target = person_dir(tmp_path, "opencode.jsonc", "AGENTS.md")
    before = snapshot(target)
    adapter.install(release(1), target, ROUTING)
    second = tree("Rule two (rule-y).")
    del second["skills/fix-bugs/checklist.md"]
    moved = Routing(base_url="http://127.0.0.1:9999", scenario="demo")
    OpenCodeAdapter(binary=adapter.binary, models=["m3"]).install(release(2, second), target, moved)

    agents_md = (target / "AGENTS.md").read_text()
    assert agents_md.startswith((FIXTURES / "AGENTS.md").read_text())
    assert "rule-y" in agents_md and "rule-x" not in agents_md
    assert agents_md.count("<!-- reef:begin") == 1
    data = jsonc.loads((target / "opencode.jsonc").read_text())
    reef = data["provider"]["reef"]
    assert reef["options"]["baseURL"] == "http://127.0.0.1:9999/v1"
    assert reef["options"]["headers"]["x-reef-release-id"] == "2"
    assert list(reef["models"]) == ["m3"] and data["model"] == "reef/m3"
    assert (target / "opencode.jsonc").read_text().count('"reef"') == 1
    assert not (target / "skills/fix-bugs/checklist.md").exists()  # gone from the release
    assert adapter.installed(target)["release"] == 2  # type: ignore[index]

    adapter.uninstall(target)
    assert snapshot(target) == before  # the first install's backup is the person's original


@pytest.mark.parametrize(
    "text",
    ['{\n  "model": "a/b",\n', '{"provider": "ollama"}', '["not", "an", "object"]', "{ /* open"],
    ids=["truncated", "provider-not-object", "array", "open-comment"],
)
def test_a_config_that_does_not_parse_installs_nothing(
    adapter: OpenCodeAdapter, tmp_path: Path, text: str
) -> None:
    target = person_dir(tmp_path, "AGENTS.md")
    (target / "opencode.jsonc").write_text(text)
    before = snapshot(target)
    with pytest.raises(InstallError) as caught:
        adapter.install(release(1), target, ROUTING)
    assert "opencode.jsonc" in caught.value.message
    assert "nothing was installed" in caught.value.message and caught.value.hint
    assert "\n" not in caught.value.one_line()
    assert snapshot(target) == before


def test_a_persons_skill_in_the_way_installs_nothing(
    adapter: OpenCodeAdapter, tmp_path: Path
) -> None:
    target = tmp_path / "cfg"
    mine = target / "skills/fix-bugs/SKILL.md"
    mine.parent.mkdir(parents=True)
    mine.write_text("my own skill\n")
    before = snapshot(target)
    with pytest.raises(InstallError, match=r"would overwrite your own skills/fix-bugs/SKILL\.md"):
        adapter.install(release(1), target, ROUTING)
    assert snapshot(target) == before


def test_uninstall_refuses_a_folder_without_reef(adapter: OpenCodeAdapter, tmp_path: Path) -> None:
    with pytest.raises(NotInstalled):
        adapter.uninstall(tmp_path)


def test_install_through_the_ledger_records_it(
    adapter: OpenCodeAdapter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reef_home: Path
) -> None:
    from reef_cli.core import installs

    scenarios.create("demo")
    publish_files("demo", tree("Rule one (rule-r1)."), reason="first")
    # the models `reef serve` lists become the provider's (GET /v1/models at install)
    monkeypatch.setattr("adapters._models.served", lambda routing: ["served-model"])
    monkeypatch.setattr(
        "adapters._install.get", lambda name: OpenCodeAdapter(binary=adapter.binary)
    )
    target = tmp_path / "cfg"
    install_release("opencode", "demo", ROUTING, "1", target)
    data = json.loads((target / "opencode.json").read_text())
    assert list(data["provider"]["reef"]["models"]) == ["served-model"]
    assert [(i.adapter, i.release) for i in installs.all_installs()] == [("opencode", 1)]
    uninstall("opencode", target)
    assert snapshot(target) == {} and installs.all_installs() == []


# ---------------------------------------------------------------- JSONC editing


def test_jsonc_edits_keep_every_other_byte() -> None:
    entry = config_json.provider_entry(ROUTING, ["m"], 1)
    for text in [
        '{"model":"a/b"}',
        '{"provider":{"x":{}},"model":"a/b"}',
        '{\r\n  "a": 1\r\n}\r\n',
        '// c\n{ // x\n  "provider": { // y\n  }\n}\n',
        '{\n  "provider": {\n    "x": {}, // last\n  },\n}\n',
    ]:
        merged = config_json.merged(text, entry, "reef/m", "f")
        data = jsonc.loads(merged)
        assert data["provider"]["reef"] == entry and data["model"] == "reef/m"
        assert config_json.unmerged(merged, text) == text


def test_jsonc_reader_handles_comments_strings_and_trailing_commas() -> None:
    text = '{\n  "a": "// not a comment", /* c */ "b": [1, 2,], "c": "q\\"uote", // x\n}'
    assert jsonc.loads(text) == {"a": "// not a comment", "b": [1, 2], "c": 'q"uote'}
    assert len(jsonc.blank(text)) == len(text)
    with pytest.raises(jsonc.JsoncError):
        jsonc.loads('{"a": "unterminated}')


# ---------------------------------------------------------------- harvest


def fixture_store(folder: Path) -> Path:
    db = folder / "opencode.db"
    conn = sqlite3.connect(db)
    conn.executescript((FIXTURES / "sessions.sql").read_text())
    conn.close()
    return db


def test_harvest_reads_reefs_sessions_from_the_store(tmp_path: Path) -> None:
    from reef_cli.core.records import Record
    from reef_cli.core.store.sqlite import SQLiteStore

    target = tmp_path / "cfg"
    target.mkdir()
    fixture_store(target)
    store = SQLiteStore(tmp_path / "records.sqlite3")
    first, second = "ses_dcd61df66ffeS1ALicw7kNq8mq", "ses_dcd61d1beffet2QLxqj5ILXW3M"
    # one record under opencode's own session id, one under a headless run's Reef id
    for rid, sid in (("rec_1", first), ("rec_2", "reef-run-2"), ("rec_x", "someone-else")):
        store.insert(
            Record(
                id=rid,
                scenario="demo",
                client_dialect="openai",
                upstream_dialect="openai",
                session_id=sid,
            )
        )
    harvest_mod.remember(target, second, "reef-run-2")

    sessions = OpenCodeAdapter().harvest(target, store=store)
    # the third session used another provider: not Reef's
    assert [s.session_id for s in sessions] == [first, second]
    skill, read = sessions
    assert skill.agent == "opencode" and skill.cwd == "/tmp/oc6/work"
    assert skill.model == "reef/fake-model"
    assert [t.role for t in skill.turns] == ["user", "assistant", "tool", "assistant"]
    assert skill.turns[0].text == "Why did the test start failing? USE_SKILL"
    assert skill.turns[1].tool_calls[0].name == "skill"
    assert skill.turns[1].tool_calls[0].arguments == {"name": "bisect-regressions"}
    assert skill.turns[2].text == "ripgrep execution failed"  # what opencode recorded
    assert skill.skills_used == ["bisect-regressions"]
    assert skill.started_at and skill.ended_at and skill.started_at < skill.ended_at
    assert skill.receipts == ["rec_1"]
    assert read.turns[1].tool_calls[0].name == "read"
    assert "some notes" in read.turns[2].text and read.turns[3].text == "Done reading."
    assert read.receipts == ["rec_2"]
    assert skill.path.endswith("opencode.db#" + first)

    ended = datetime.fromisoformat(str(read.ended_at).replace("Z", "+00:00"))
    after = OpenCodeAdapter().harvest(target, ended + timedelta(seconds=1), store=store)
    assert after == []  # nothing updated since
    assert [s.session_id for s in OpenCodeAdapter().harvest(target, ended, store=store)] == [second]


def test_harvest_of_a_folder_without_a_store_is_empty(tmp_path: Path) -> None:
    assert OpenCodeAdapter().harvest(tmp_path) == []
    (tmp_path / "opencode.db").write_text("not sqlite")
    assert OpenCodeAdapter().harvest(tmp_path) == []


# ---------------------------------------------------------------- the binary


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1.18.33", (1, 18, 33)), ("opencode 1.19.0\n", (1, 19, 0)), ("v2", None)],
)
def test_version_parsing(text: str, expected: tuple[int, int, int] | None) -> None:
    assert parse_version(text) == expected


@pytest.mark.parametrize("version", ["2.0.0", "1.17.9", "0.9.1", "not-a-version"])
def test_unsupported_versions_are_refused(tmp_path: Path, version: str) -> None:
    binary = fake_opencode(tmp_path / version.replace(".", "_"), version=version)
    target = tmp_path / "cfg"
    with pytest.raises(AgentVersionUnsupported) as caught:
        OpenCodeAdapter(binary=binary, models=["m"]).install(release(), target, ROUTING)
    assert "nothing was changed" in caught.value.message
    assert caught.value.hint and BINARY.pinned in caught.value.hint
    assert not target.exists()


def test_a_missing_binary_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REEF_TOOLS_BIN", str(tmp_path / "none"))
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    with pytest.raises(AgentNotFound, match="opencode is not installed"):
        OpenCodeAdapter().agent_version()
    with pytest.raises(AgentNotFound):
        OpenCodeAdapter(binary=str(tmp_path / "opencode")).install(release(), tmp_path, ROUTING)


# ---------------------------------------------------------------- the wrapper


def test_wrapper_argv_and_env(adapter: OpenCodeAdapter, tmp_path: Path) -> None:
    target = tmp_path / "cfg"
    adapter.install(release(1), target, ROUTING)
    argv, env = adapter.wrapper(target, ROUTING, [])
    assert argv == [adapter.binary, "--model", "reef/m1"]
    assert env["OPENCODE_CONFIG_DIR"] == str(target)
    assert env["OPENCODE_DB"] == str(target / "opencode.db")
    assert env["OPENCODE_DISABLE_AUTOUPDATE"] == "1"
    assert env["OPENCODE_DISABLE_MODELS_FETCH"] == "1"
    assert "REEF_TOKEN" not in env  # read from the caller's environment, never copied

    assert adapter.wrapper(target, ROUTING, ["run", "hi"])[0][1:] == [
        "run",
        "--model",
        "reef/m1",
        "hi",
    ]
    assert adapter.wrapper(target, ROUTING, ["-m", "x/y", "run"])[0][1:] == ["-m", "x/y", "run"]
    assert adapter.wrapper(target, ROUTING, ["models"])[0][1:] == ["models"]
    assert adapter.wrapper(target, ROUTING, ["./project"])[0][1:] == [
        "--model",
        "reef/m1",
        "./project",
    ]


def test_wrapper_on_the_global_config_dir_sets_no_override(
    adapter: OpenCodeAdapter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    target = adapter.default_target()
    assert target == tmp_path / "xdg-config" / "opencode"
    adapter.install(release(1), target, ROUTING)
    assert adapter.installed(target)["layout"] == "global"  # type: ignore[index]
    _, env = adapter.wrapper(target, ROUTING, [])
    assert "OPENCODE_CONFIG_DIR" not in env and "OPENCODE_DB" not in env
    assert headless.db_path(target) == tmp_path / "xdg-data" / "opencode" / "opencode.db"


def test_wrapper_refuses_a_folder_without_reef(adapter: OpenCodeAdapter, tmp_path: Path) -> None:
    with pytest.raises(NotInstalled, match="not installed"):
        adapter.wrapper(tmp_path, ROUTING, [])


def test_headless_argv_passes_the_prompt_verbatim() -> None:
    prompt = 'fix  "it" -x --model\nnow'
    argv = headless.run_argv("/bin/opencode", "reef/m", prompt, headless.title_of(prompt))
    cut = argv.index("--")
    assert argv[:cut] == ["/bin/opencode", "run", "--model", "reef/m", "--title", argv[5]]
    assert " ".join(argv[cut + 1 :]) == prompt  # opencode joins its words with spaces
    assert not any(" " in word for word in argv[cut + 1 :])  # so none gets quoted


def test_headless_env_keeps_opencodes_state_in_the_run(tmp_path: Path) -> None:
    target = tmp_path / ".reef-agent"
    env = headless.headless_env(target, ROUTING, "tok", "sid-1")
    assert env["REEF_TOKEN"] == "tok" and env["REEF_SESSION_ID"] == "sid-1"
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        assert Path(env[name]).is_relative_to(target)
    assert env["OPENCODE_CONFIG_DIR"] == str(target)
    headless.offline_dirs(target)
    lock = json.loads((target / "package-lock.json").read_text())
    assert headless.PLUGIN_SDK in lock["packages"][""]["dependencies"]
    assert (target / ".xdg/config/opencode/node_modules").is_dir()


def test_notice_names_a_newer_served_release(
    adapter: OpenCodeAdapter, tmp_path: Path, reef_home: Path
) -> None:
    scenarios.create("demo")
    publish_files("demo", tree("Rule one (rule-r1)."), reason="first")
    target = tmp_path / "cfg"
    adapter.install(release(1), target, ROUTING)
    assert adapter.notice(target) is None
    publish_files("demo", tree("Rule two (rule-r2)."), reason="second")
    notice = adapter.notice(target)
    assert notice == (
        "Reef r1 installed — r2 available (reef-opencode versions; reef-opencode install 2)"
    )

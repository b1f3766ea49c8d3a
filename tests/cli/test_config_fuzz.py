"""Every config file and environment variable Reef reads, fed random bytes and values of
the wrong type: a command that reads it prints one ``reef: error: … (fix: …)`` line and
exits non-zero, or ignores it where that is the documented behaviour — never a traceback.

The inputs are seeded (``random.Random(23)``), so a failure names a reproducible case.
"""

from __future__ import annotations

import json
import math
import random
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomli_w
from typer.testing import CliRunner

from reef_cli.cli.main import app
from reef_cli.core import paths
from reef_cli.core.config import FIELDS, env_name
from tests.cli.helpers import reef

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()

# ----------------------------------------------------------------------------- inputs

_rng = random.Random(23)
RANDOM = [bytes(_rng.randrange(256) for _ in range(_rng.randrange(1, 300))) for _ in range(3)]
# bytes: what a damaged or wrong file holds
BYTES: dict[str, bytes] = {
    **{f"random{i}": blob for i, blob in enumerate(RANDOM)},
    "invalid-utf8": b"\xff\xfe\xc3\x28 key: value\n",
    "nul": b"key\x00: 1\n",
    "deep-json": b"[" * 100_000,
    "deep-yaml": b"a: " + b"{b: " * 3000 + b"1" + b"}" * 3000 + b"\n",
    "deep-toml": b"a = " + b"[" * 100_000,
    "top-list": b"[1, 2, 3]\n",
    "top-string": b'"just a string"\n',
    "top-number": b"-1e999\n",
}
# values: what a file of the right syntax holds for each key, of the wrong type
WRONG: dict[str, object] = {
    "list": [1, "two"],
    "mapping": {"x": 1},
    "string": "not-a-number \x1b[2J",
    "negative": -1,
    "huge": 10**40,
    "nan": math.nan,
    "inf": math.inf,
    "bool": True,
}


def _json(data: object) -> bytes:
    return json.dumps(data).encode()  # NaN and Infinity as Python's json writes them


def _yaml(data: object) -> bytes:
    import yaml

    return yaml.safe_dump(data).encode()


def _toml(data: dict[str, object]) -> bytes:
    return tomli_w.dumps({k: v for k, v in data.items() if v is not None}).encode()


# ----------------------------------------------------------------------------- files


@dataclass(frozen=True)
class File:
    """A file Reef reads, where it lives, and a command that reads it."""

    name: str
    path: Callable[[Path], Path]  # given the test's tmp dir
    command: Callable[[Path], list[str]]
    keys: tuple[str, ...]  # the keys a well-formed file has (for wrong-type values)
    dump: Callable[[dict[str, object]], bytes]
    strict: bool  # True: anything malformed is refused; False: ignored (documented)


def _home(rel: str) -> Callable[[Path], Path]:
    return lambda tmp: paths.state_dir() / rel


def _in_tmp(rel: str) -> Callable[[Path], Path]:
    return lambda tmp: tmp / rel


def _serve_keys() -> tuple[str, ...]:
    from reef_cli.server.serve_config import ServeConfig

    return tuple(k for k in ServeConfig.model_fields if k not in ("host", "open", "port"))


# Every file Reef reads, found by grepping reef_cli, recipes, adapters, reefd and sandbox for
# json.loads / tomllib / yaml.safe_load / read_json_object:
#   config.toml (core/config.py), serve.yaml (server/serve_config.py), token and tokens.json
#   (core/tokens.py), scenarios/S/scenario.toml (core/scenarios.py), a task set's YAML and
#   JSONL (recipes/tasks/loading.py), a tree's reef.toml and SKILL.md frontmatter (the
#   persona-like files a tree holds; core/tree.py), the chain remote's git config
#   (core/remotes.py), jobs/*.json (core/store/sqlite.py), scenarios/S/learning.json
#   (core/learning_state.py), installs.json (core/installs.py), serve.json and serve.port
#   (cli/serve_process.py), an agent folder's .reef/hook.json (adapters/_hook.py) and
#   reefd.yaml (reefd/daemon_config.py; `reefd start` needs torch, so its loader is called here).
# Not listed: records.sqlite3 and records-journal/ (data, checked by the store and journal
# tests), models/verified.json (a cache: damaged means re-verify), scenario policy files
# (Reef has none: the policy screen is code, core/policy.py).
FILES = [
    File("config.toml", _home("config.toml"), lambda t: ["config", "show"], FIELDS, _toml, True),
    File(
        "serve.yaml",
        _in_tmp("serve.yaml"),
        # --open on a non-loopback host is refused after the file is read: never serves
        lambda t: ["serve", "-c", str(t / "serve.yaml"), "--host", "0.0.0.0", "--open"],
        _serve_keys(),
        _yaml,
        True,
    ),
    # any visible ASCII is a token; text a header cannot carry is refused
    File("token", _home("token"), lambda t: ["token"], (), _json, False),
    File(
        "tokens.json",
        _home("tokens.json"),
        lambda t: ["token", "list"],
        ("tokens",),
        _json,
        True,
    ),
    File(
        "scenario.toml",
        _home("scenarios/demo/scenario.toml"),
        lambda t: ["scenario", "list"],
        ("description", "created_at"),
        _toml,
        False,  # values are shown as text; only unreadable TOML is refused
    ),
    File(
        "tasks.yaml",
        _in_tmp("tasks.yaml"),
        lambda t: ["tasks", "show", str(t / "tasks.yaml")],
        ("name", "runner", "scorer", "tasks", "splits"),
        _yaml,
        True,
    ),
    File(
        "tasks.jsonl",
        _in_tmp("tasks.jsonl"),
        lambda t: ["tasks", "show", str(t / "tasks.jsonl")],
        ("id", "prompt", "answer", "split"),
        _json,
        True,
    ),
    File(
        "reef.toml",
        _in_tmp("tree/reef.toml"),
        lambda t: ["harness", "publish", str(t / "tree"), "-s", "demo", "-m", "fuzz"],
        ("format", "requires"),
        _toml,
        True,
    ),
    File(
        "SKILL.md frontmatter",
        _in_tmp("tree/skills/fuzz/SKILL.md"),
        lambda t: ["harness", "publish", str(t / "tree"), "-s", "demo", "-m", "fuzz"],
        ("name", "description"),
        lambda data: b"---\n" + _yaml(data) + b"---\nbody\n",
        True,
    ),
    File(
        "chain remote config",
        _home("scenarios/demo/chain.git/config"),
        lambda t: ["scenario", "remote", "show", "demo"],
        ("url",),
        lambda data: b'[remote "reef"]\n' + _toml(data),
        True,
    ),
    File(
        "learning.json",
        _home("scenarios/demo/learning.json"),
        lambda t: ["scenario", "status", "demo"],
        ("recipe", "counts", "last_run", "next_trigger", "runs", "config", "checked_at"),
        _json,
        False,  # a damaged state file reads as none: the next check rewrites it
    ),
    File(
        "jobs/*.json",
        _home("jobs/job_0123abcd.json"),
        lambda t: ["scenario", "status", "demo"],
        ("id", "scenario", "state", "progress", "outcome", "created_at", "options"),
        _json,
        False,  # a damaged job file is skipped
    ),
    File(
        "installs.json",
        _home("installs.json"),
        lambda t: ["harness", "versions", "-s", "demo"],
        ("scenario", "adapter", "target", "release"),
        _json,
        False,  # a damaged ledger only loses the "installed" hint
    ),
    File(
        "serve.json",
        _home("serve.json"),
        lambda t: ["serve", "status"],
        ("pid", "port", "url", "idle_exit", "background", "started_at"),
        _json,
        False,  # a damaged one reads as no serve running
    ),
    File("serve.port", _home("serve.port"), lambda t: ["serve", "status"], (), _json, False),
]


def _payloads(file: File) -> dict[str, bytes]:
    out = dict(BYTES)
    for kind, value in WRONG.items():
        if file.keys:
            data: object = {key: value for key in file.keys}
            if file.name == "tokens.json":
                data = {"tokens": [{"name": value, "sha256": value, "scenarios": value}]}
            elif file.name == "installs.json":
                data = [data]
        else:
            data = value
        try:
            out[f"wrong-{kind}"] = file.dump(data)  # type: ignore[arg-type]
        except (TypeError, ValueError):  # a format that cannot hold this value at all
            continue
    return out


CASES = [(file, kind) for file in FILES for kind in _payloads(file)]

# ----------------------------------------------------------------------------- oracle


def check_one_line(result, what: str) -> None:
    """No traceback; success, or exactly one `reef: error: … fix: …` line on stderr."""
    exc = result.exception
    assert exc is None or isinstance(exc, SystemExit), (what, repr(exc))
    assert "Traceback" not in result.output, (what, result.output[-2000:])
    if result.exit_code != 0:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, (what, result.stderr[-2000:])
        assert lines[0].startswith("reef: error:") and "fix:" in lines[0], (what, lines[0])


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    reef("scenario", "create", "demo")
    reef("harness", "init", str(tmp_path / "tree"))
    return tmp_path


@pytest.mark.parametrize(
    ("file", "kind"), CASES, ids=[f"{file.name}-{kind}" for file, kind in CASES]
)
def test_file_fuzz(demo: Path, file: File, kind: str) -> None:
    target = file.path(demo)
    target.parent.mkdir(parents=True, exist_ok=True)
    if file.name == "chain remote config":
        git_config = target.read_bytes()
        target.write_bytes(git_config + _payloads(file)[kind])
    else:
        target.write_bytes(_payloads(file)[kind])
    result = runner.invoke(app, file.command(demo), catch_exceptions=True)
    check_one_line(result, f"{file.name} <- {kind}")
    if file.strict and ((kind in BYTES and kind != "deep-yaml") or kind.startswith("wrong-")):
        if file.name == "chain remote config" or file.name.startswith("scenario"):
            return  # git and TOML text values: a wrong type may still be a usable string
        assert result.exit_code != 0, (file.name, kind, result.output[-500:])


def test_reefd_yaml_fuzz(tmp_path: Path) -> None:
    """``reefd start`` needs torch to reach its config; its loader gets the same inputs."""
    from reef_cli.core.errors import ConfigError
    from reefd import daemon_config as config

    path = tmp_path / "reefd.yaml"
    for kind, data in {**BYTES, "wrong-list": b"engine: [1]\n", "wrong-nan": b"a: .nan\n"}.items():
        path.write_bytes(data)
        with pytest.raises(ConfigError) as caught:
            config.load(path)
        line = caught.value.one_line()
        assert "\n" not in line and caught.value.hint, (kind, line)


# ----------------------------------------------------------------------------- environment

# Every REEF_* variable Reef's code reads (grep os.environ / getenv / REEF_ in reef_cli,
# recipes, adapters, reefd, sandbox) and a command that reads it. The settings are
# REEF_<FIELD> of reef_cli.core.config.Settings, read by every command through
# load_settings; `reef config show` shows them all.
# `reef sandbox check` reports each check as a row (a bad setting is a "no" row naming it,
# exit 1): its JSON must parse, with no traceback
CHECK = ["sandbox", "check", "--json"]
ENV_COMMANDS: dict[str, list[str]] = {
    **{env_name(field): ["config", "show"] for field in FIELDS},
    "REEF_HOME": ["config", "show"],
    "REEF_DATABASE_URL": ["records", "stats"],
    "REEF_TOKEN": ["token"],
    "REEF_SANDBOX": CHECK,
    "REEF_PROPOSER_SANDBOX": CHECK,
    "REEF_BWRAP": CHECK,
    "REEF_SANDBOX_UID": CHECK,
    "REEF_SANDBOX_GID": CHECK,
    "REEF_SANDBOX_SECRET_DIRS": CHECK,
    "REEF_SANDBOX_WATCHDOG_LOG": CHECK,
    "REEF_TOOLS_BIN": CHECK,
}
# read by the wrappers (reef-pi …): run through their own entry point below
WRAPPER_ENV = ("REEF_SCENARIO", "REEF_AGENT_DIR", "REEF_SERVE_IDLE_EXIT")
# read elsewhere: checked by calling the reader (a command would need a model or an agent)
READER_ENV = ("REEF_EMBEDDED_SEED",)
# set by Reef for what it starts and read there, not by Reef's Python: the agents' hooks
# and extension (REEF_CLI, REEF_PI_NOTICE), the agents' requests (REEF_SESSION_ID), the
# sandbox's own marker inside a sandbox (REEF_SANDBOX_RUN)
NOT_READ_HERE = ("REEF_CLI", "REEF_PI_NOTICE", "REEF_SESSION_ID", "REEF_SANDBOX_RUN")
# names that look like variables but are not: Python constants and the install script's
# shell variables
NOT_VARIABLES = ("REEF_LOGGERS", "REEF_KEYS", "REEF_BIN", "REEF_TOOLS")

ENV_VALUES: dict[str, str] = {
    **{
        f"random{i}": blob.replace(b"\0", b"").decode("utf-8", "surrogateescape")
        for i, blob in enumerate(RANDOM)
    },
    "negative": "-1",
    "huge": "1" + "0" * 40,
    "nan": "nan",
    "inf": "1e999",
    "list": "[1, 2]",
    "escape": "\x1b]0;owned\x07\x1b[2J",
    "long": "x" * 100_000,
}


def _names_in_code() -> set[str]:
    names: set[str] = set()
    for package in ("reef_cli", "recipes", "adapters", "reefd", "sandbox"):
        for path in (ROOT / package).rglob("*"):
            if path.suffix in (".py", ".j2", ".ts", ".sh") and path.is_file():
                names |= set(re.findall(r"\bREEF_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    return names | {env_name(field) for field in FIELDS}


def test_every_variable_is_listed_here() -> None:
    """A variable someone adds to the code fails this until it is fuzzed (or said why not)."""
    listed = set(ENV_COMMANDS) | set(WRAPPER_ENV) | set(READER_ENV)
    listed |= set(NOT_READ_HERE) | set(NOT_VARIABLES)
    assert _names_in_code() - listed == set()
    assert listed - _names_in_code() == set()  # no stale rows


def test_every_variable_is_documented() -> None:
    docs = "\n".join(p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
    variables = _names_in_code() - set(NOT_VARIABLES)
    undocumented = sorted(name for name in variables if not re.search(rf"\b{name}\b", docs))
    assert undocumented == []


ENV_CASES = [(name, kind) for name in ENV_COMMANDS for kind in ENV_VALUES]


@pytest.mark.parametrize(("name", "kind"), ENV_CASES, ids=[f"{n}-{k}" for n, k in ENV_CASES])
def test_env_fuzz(tmp_path: Path, name: str, kind: str) -> None:
    value = ENV_VALUES[kind]
    if name == "REEF_HOME":
        value = str(tmp_path / value.replace("/", "_")[:200])
    env = {name: value}
    if name in ("REEF_SANDBOX_UID", "REEF_SANDBOX_GID"):
        env["REEF_SANDBOX"] = "auto"
    result = runner.invoke(app, ENV_COMMANDS[name], env=env, catch_exceptions=True)
    if ENV_COMMANDS[name] is CHECK and result.exit_code == 1 and not result.stderr.strip():
        rows = json.loads(result.stdout)
        assert any(not row["ok"] for row in rows), rows
        assert "Traceback" not in result.output
        return
    check_one_line(result, f"${name}={value[:40]!r}")


@pytest.mark.parametrize("name", WRAPPER_ENV)
@pytest.mark.parametrize("kind", list(ENV_VALUES))
def test_wrapper_env_fuzz(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str, kind: str
) -> None:
    from reef_cli.cli.wrappers import Wrapper

    monkeypatch.setenv(name, ENV_VALUES[kind])
    monkeypatch.setattr(sys, "argv", ["reef-pi", "versions"])
    try:
        Wrapper("pi", "reef-pi").main()
    except SystemExit as stop:
        code = stop.code
    else:
        code = 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    if code not in (0, None):
        lines = [line for line in captured.err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("reef: error:"), captured.err
        assert "fix:" in lines[0], lines[0]


@pytest.mark.parametrize("kind", list(ENV_VALUES))
def test_idle_exit_env_fuzz(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    from reef_cli.cli import serve_process
    from reef_cli.core.errors import ReefError

    monkeypatch.setenv(serve_process.IDLE_ENV, ENV_VALUES[kind])
    try:
        seconds = serve_process.idle_exit_seconds()
    except ReefError as exc:
        assert "\n" not in exc.one_line() and exc.hint
    else:
        assert 0 <= seconds < math.inf


@pytest.mark.parametrize("kind", list(ENV_VALUES))
def test_embedded_seed_env_fuzz(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    from reef_cli.core import embedded_engine
    from reef_cli.core.errors import ReefError

    monkeypatch.setenv("REEF_EMBEDDED_SEED", ENV_VALUES[kind])
    try:
        seed = embedded_engine.seed()
    except ReefError as exc:
        assert "\n" not in exc.one_line() and exc.hint
    else:
        assert 0 <= seed < 2**32


# ----------------------------------------------------------------------------- named variants


def test_binary_serve_yaml_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe" * 8)
    result = runner.invoke(app, ["serve", "-c", str(config)], catch_exceptions=True)
    check_one_line(result, "binary serve.yaml")
    assert result.exit_code == 1 and "is not UTF-8 text" in result.stderr
    assert result.stdout == ""  # no banner


@pytest.mark.parametrize(
    "url", ["postgres:/bad", "postgresql://h:port/db", "postgresql://[::1/db", "postgres:bad"]
)
def test_bad_database_url_is_one_line(url: str) -> None:
    result = runner.invoke(
        app, ["records", "stats"], env={"REEF_DATABASE_URL": url}, catch_exceptions=True
    )
    check_one_line(result, url)
    assert result.exit_code == 2 and "postgresql://USER:PASSWORD@HOST" in result.stderr


def test_busy_port_is_one_line_before_any_banner(scripted) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = runner.invoke(
            app,
            ["serve", "--port", str(port), "--upstream", scripted.server.url + "/v1"],
            catch_exceptions=True,
        )
    check_one_line(result, "busy port")
    assert result.exit_code == 1
    assert f"port {port} is in use" in result.stderr and "(fix: --port " in result.stderr
    assert "stop the other server" in result.stderr
    assert result.stdout == ""  # the banner comes only once the port is ours
    suggested = int(result.stderr.split("(fix: --port ")[1].split()[0])
    with socket.socket() as free:
        free.bind(("127.0.0.1", suggested))  # the port it names is one that can be bound


def test_hosted_model_without_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from reef_cli.core.budget import Budget
    from reef_cli.core.errors import ModelError
    from reef_cli.core.llm import ModelClient

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    budget = Budget()
    client = ModelClient("openai/gpt-4o-mini", budget=budget)
    with pytest.raises(ModelError) as caught:
        client.chat([{"role": "user", "content": "hi"}])
    assert caught.value.one_line() == (
        "no OPENAI_API_KEY set for model openai/gpt-4o-mini "
        "(fix: export OPENAI_API_KEY=… or reef model use …)"
    )
    assert budget.calls == 0  # refused up front: no try, no retry


def test_doctor_names_the_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from reef_cli.cli import doctor_checks

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("REEF_MODEL", "anthropic/claude-3-5-haiku-latest")
    row = doctor_checks._model(timeout=0.5)
    assert row.status != "ok"
    assert "ANTHROPIC_API_KEY" in row.detail and "ANTHROPIC_API_KEY" in row.fix
    assert "cannot reach" not in row.detail


def test_local_model_needs_no_key(monkeypatch: pytest.MonkeyPatch, scripted) -> None:
    """A model at an api_base (a local server) is called with a placeholder key."""
    from reef_cli.core.llm import missing_key

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert missing_key("openai/local", scripted.server.url + "/v1") is None
    assert missing_key("ollama/llama3.2") is None
    assert missing_key("openai/gpt-4o-mini") == "OPENAI_API_KEY"

"""The CLI shells: records, sessions, report, token, serve's refusals; light imports."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from reef_cli.cli import records, report, serve, sessions, token
from reef_cli.core.errors import ReefError, ServeError
from reef_cli.core.records import Record, db_path, new_receipt
from reef_cli.core.store.sqlite import SQLiteStore


def _app() -> typer.Typer:
    app = typer.Typer()
    app.add_typer(records.app, name="records")
    app.add_typer(sessions.app, name="sessions")
    app.add_typer(token.app, name="token")
    app.command("report")(report.report)
    app.command("serve")(serve.serve)
    return app


def test_cli_modules_import_only_typer():
    code = (
        "import sys; import reef_cli.cli.serve, reef_cli.cli.records, reef_cli.cli.sessions, "
        "reef_cli.cli.report, reef_cli.cli.token; "
        "heavy = ('starlette', 'uvicorn', 'httpx', 'pydantic', 'git', 'aiohttp', 'fastapi'); "
        "bad = [m for m in heavy "
        "if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_records_sessions_report(home):
    store = SQLiteStore(db_path())
    rid = new_receipt()
    store.insert(
        Record(
            id=rid,
            scenario="default",
            client_dialect="openai",
            upstream_dialect="anthropic",
            session_id="sess-1",
            request={"model": "m"},
            status=200,
        )
    )
    runner = CliRunner()
    app = _app()
    r = runner.invoke(app, ["records", "list", "--json"])
    assert r.exit_code == 0 and json.loads(r.output)[0]["id"] == rid
    r = runner.invoke(app, ["records", "show", rid])
    assert json.loads(r.output)["request"] == {"model": "m"}
    r = runner.invoke(app, ["records", "export", "--jsonl"])
    assert [json.loads(line)["id"] for line in r.output.splitlines()] == [rid]
    r = runner.invoke(app, ["sessions", "list", "--json"])
    assert json.loads(r.output)[0]["session_id"] == "sess-1"
    r = runner.invoke(app, ["sessions", "show", "sess-1"])
    assert rid in r.output
    r = runner.invoke(app, ["report", "--score", "1", "--feedback", "nice", "--last", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["references"] == [rid]
    r = runner.invoke(app, ["report", "--score", "1", "--receipt", "rec_" + "0" * 24])
    assert isinstance(r.exception, ReefError) and "unknown receipt" in str(r.exception)


def test_token_commands(home):
    runner = CliRunner()
    app = _app()
    first = runner.invoke(app, ["token"]).output.strip()
    assert first.startswith("reef_") and runner.invoke(app, ["token"]).output.strip() == first
    assert stat.S_IMODE(os.stat(home / "token").st_mode) == 0o600
    r = runner.invoke(app, ["token", "create", "ci", "--scenario", "web"])
    scoped = r.output.strip().splitlines()[0]
    assert scoped.startswith("reef_") and scoped != first
    assert scoped not in (home / "tokens.json").read_text()  # stored hashed
    assert "ci: web" in runner.invoke(app, ["token", "list"]).output
    assert runner.invoke(app, ["token", "revoke", "ci"]).exit_code == 0


def test_serve_refuses_open_non_loopback(home):
    r = CliRunner().invoke(
        _app(),
        [
            "serve",
            "--host",
            "0.0.0.0",
            "--open",
            "--inference.upstream-url",
            "http://127.0.0.1:1/v1",
        ],
    )
    assert isinstance(r.exception, ServeError) and "only loopback" in str(r.exception)


def test_serve_config_file_and_aliases(home, tmp_path):
    from reef_cli.server import serve_config as config

    f = tmp_path / "serve.yaml"
    f.write_text(
        "inference.upstream-url: http://127.0.0.1:11434\n"
        "upstream-model: qwen\nrecipe: reefine\nport: 9999\n"
    )
    cfg = config.build(config.load_file(f))
    assert (
        cfg.upstream_base() == "http://127.0.0.1:11434"
        and cfg.upstream_model == "qwen"
        and cfg.port == 9999
    )
    assert config.build({"upstream": "http://h/v1/"}).upstream_base() == "http://h"
    assert config.build({"upstream": "https://api.anthropic.com"}).dialect == "anthropic"
    with pytest.raises(ServeError):
        config.build({"upstream": "ftp://x"}).upstream_base()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "port: 1\nhost: a\n  open: true\n",
            "is not valid YAML: mapping values are not allowed here at line 3",
        ),
        ("- port: 1\n", "must hold a mapping of settings (key: value lines), not a list"),
        ("false\n", "must hold a mapping of settings (key: value lines), not a boolean"),
        (
            "reef:\n  batch-size: 0\n  recipe: skillclaw\n",
            "serve setting 'reef.batch_size': Input should be greater than or equal to 1",
        ),
        ("a: 2020-02-30\n", "is not valid YAML: a value it cannot read (day is out of range"),
    ],
)
def test_a_bad_serve_file_is_one_line(home, tmp_path, text, message):
    """`reef serve -c` reads its file with the shared loader (core/yaml_config.py): one
    ``ServeError`` line, before any banner, and nothing written to the state dir."""
    path = tmp_path / "serve.yaml"
    path.write_text(text)
    before = sorted(tmp_path.rglob("*"))
    result = CliRunner().invoke(_app(), ["serve", "-c", str(path)])
    assert isinstance(result.exception, ServeError), result.output
    assert message in result.exception.one_line() and "\n" not in result.exception.one_line()
    assert "Traceback" not in result.output and "live loop" not in result.output
    assert sorted(tmp_path.rglob("*")) == before  # the state dir (tmp_path/reef-home) too

"""Every agent wrapper's sub-commands that need no agent session (`reef-pi`, `reef-claude`,
`reef-codex`, `reef-opencode`: the wrappers of ``reef_cli.core.agents``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from reef_cli.core import agents, scenarios
from reef_cli.core.publishing import publish_files
from reef_cli.core.tree import starter_tree

BIN = Path(sys.executable).parent
WRAPPERS = tuple(agent.wrapper for agent in agents.registered())


def run(
    tool: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / tool), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_help_lists_the_subcommands() -> None:
    for tool in WRAPPERS:
        done = run(tool, "--help")
        assert done.returncode == 0
        for sub in ("evolve", "report", "versions", "install", "doctor"):
            assert sub in done.stdout


def test_versions_lists_the_chain_without_starting_anything(reef_home: Path) -> None:
    scenarios.create("team")
    publish_files("team", starter_tree().files(), reason="the first one")
    done = run("reef-pi", "versions", "-s", "team")
    assert done.returncode == 0, done.stderr
    assert "r1" in done.stdout and "the first one" in done.stdout
    assert not (reef_home / "serve.json").exists()


def test_report_without_a_score_is_one_clear_line(reef_home: Path) -> None:
    done = run("reef-pi", "report")
    assert done.returncode == 1
    assert done.stderr.strip().startswith("reef: error: nothing to report")
    assert "Traceback" not in done.stderr


def test_unknown_scenario_name_is_refused_in_one_line() -> None:
    done = run("reef-claude", "versions", "-s", "Not_Kebab")
    assert done.returncode == 1 and "kebab-case" in done.stderr
    assert "Traceback" not in done.stderr


def test_score_must_be_finite() -> None:
    import pytest

    from reef_cli.cli._wrapper_ops import parse_score
    from reef_cli.core.errors import ReefError

    assert parse_score(None) is None
    assert [parse_score(v) for v in ("0.8", "-2", " 1e3 ", "0")] == [0.8, -2.0, 1000.0, 0.0]
    for bad in ("nan", "NaN", "inf", "-Infinity", "1e999", "abc", "", "0.5x"):
        with pytest.raises(ReefError, match="is not a finite number"):
            parse_score(bad)


def test_report_score_nan_is_one_line_without_a_traceback(reef_home: Path) -> None:
    for tool in WRAPPERS:
        done = run(tool, "report", "--score", "nan")
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert done.stderr.strip() == (
            "reef: error: --score 'nan' is not a finite number "
            "(fix: pass a finite number such as --score 0.8 or --score -1)"
        )


def test_report_id_follows_the_session_and_its_receipts() -> None:
    from reef_cli.cli._wrapper_ops import report_id

    receipts = ["rec_" + "a" * 24, "rec_" + "b" * 24]
    first = report_id("pi", "demo", "s1", receipts)
    assert first == report_id("pi", "demo", "s1", list(reversed(receipts)))
    assert first.startswith("rep_") and len(first) == 28
    assert first != report_id("pi", "demo", "s2", receipts)
    assert first != report_id("pi", "demo", "s1", receipts[:1])
    assert first != report_id("claude-code", "demo", "s1", receipts)


# ------------------------------------------------------------ evolve --filed


def test_evolve_needs_an_ask_or_filed_and_says_so(reef_home: Path) -> None:
    scenarios.create("team")
    env = {"REEF_SCENARIO": "team"}
    none = run("reef-pi", "evolve", "--filed", env=env)
    assert none.returncode == 1 and "Traceback" not in none.stderr
    assert "no ask filed for team by pi's /evolve" in none.stderr + none.stdout
    both = run("reef-pi", "evolve", "be brief", "--filed", env=env)
    assert both.returncode == 1 and "not both" in both.stderr + both.stdout
    neither = run("reef-pi", "evolve", env=env)
    assert neither.returncode == 1 and "reef-pi evolve --filed" in neither.stderr + neither.stdout


def test_filed_asks_become_jobs_oldest_first_and_move_to_sent(
    reef_home: Path, monkeypatch: Any
) -> None:
    import httpx

    from reef_cli.cli import _wrapper_ops
    from reef_cli.core.asks import file_ask, filed_asks
    from reef_cli.core.tokens import TokenSet
    from reef_cli.server.app import create_app
    from reef_cli.server.serve_config import ServeConfig
    from tests.fakes.jobs import KeptJobs
    from tests.fakes.server_thread import ServerThread

    scenarios.create("team")
    common = {"scenario": "team", "installed_release": 1, "session": "s", "cwd": "/w"}
    first = file_ask("always run the tests first", agent="pi", **common)
    second = file_ask("explain the root cause before fixing", agent="pi", **common)
    other = file_ask("answer tersely", agent="claude-code", **common)
    runner = KeptJobs()
    config = ServeConfig(upstream="http://127.0.0.1:9/v1")
    with ServerThread(create_app(config, tokens=TokenSet("reef_t0ken_abc", []), jobs=runner)) as up:
        monkeypatch.setattr(
            _wrapper_ops,
            "_client",
            lambda: (httpx.Client(base_url=up.url), {"authorization": "Bearer reef_t0ken_abc"}),
        )
        sent = _wrapper_ops.submit_filed("pi", "team", wait=False)
    assert [j.ask for j in runner.jobs] == [
        "always run the tests first",
        "explain the root cause before fixing",
    ]
    assert [j["id"] for j in sent] == [j.id for j in runner.jobs]
    assert not first.exists() and not second.exists() and other.exists()
    moved = json.loads((first.parent / "sent" / first.name).read_text())
    assert moved["job"] == runner.jobs[0].id and moved["ask"] == "always run the tests first"
    assert filed_asks("team", "pi") == []  # sent once, never again
    assert [p for p, _ in filed_asks("team", "claude-code")] == [other]

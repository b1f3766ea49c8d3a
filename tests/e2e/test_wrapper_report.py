"""`reef-pi` end to end: the real console script starts `reef serve` in the background
(serve_process.ensure_running), runs the real pi through it to the scripted fake model,
then `reef-pi report` scores exactly the last session's receipts.

Everything runs as subprocesses with their own HOME, REEF_HOME and a free port; the
background serve reaches the fake model through REEF_MODEL=openai/scripted +
REEF_API_BASE, and is stopped at the end (serve_process.stop()).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.claude_code.adapter import ClaudeCodeAdapter
from adapters.pi.adapter import PiAdapter
from adapters.pi.headless import QUIET_ENV
from reef_cli.cli import serve_process
from reef_cli.core.publishing import publish_files
from reef_cli.core.reports import list_reports
from reef_cli.core.store.sqlite import SQLiteStore
from tests.e2e import agent_rig
from tests.e2e.conftest import RULE_R1, FakeModel, tree_files
from tests.fakes.upstream import Turn

needs_pi = agent_rig.needs("pi", "pi")
needs_claude = agent_rig.needs("claude", "Claude Code")
SCENARIO = "wrapped"
TIMEOUT = 120
BIN = Path(sys.executable).parent  # where the venv's reef-pi console script lives


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def wrapper_env(
    tmp_path: Path, reef_home: Path, fake_model: FakeModel, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, str]]:
    port = str(_free_port())
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(home),
        "REEF_HOME": str(reef_home),
        "REEF_SERVE_PORT": port,
        "REEF_MODEL": "openai/scripted",
        "REEF_API_BASE": fake_model.url + "/v1",
        "REEF_SCENARIO": SCENARIO,
        "REEF_PI_NOTICE": "0",
        **QUIET_ENV,
    }
    monkeypatch.setenv("REEF_SERVE_PORT", port)  # for serve_process.stop() here
    try:
        yield env
    finally:
        pid = None
        if serve_process.state_file().exists():
            pid = int(json.loads(serve_process.state_file().read_text())["pid"])
        serve_process.stop()
        if pid is not None:
            deadline = time.monotonic() + 15
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not _alive(pid), "the background reef serve did not stop"


def _reef_pi(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _run("reef-pi", env, cwd, *args)


def _run(tool: str, env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / tool), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


@needs_pi
def test_reef_pi_report_scores_the_last_session(
    wrapper_env: dict[str, str], fake_model: FakeModel, reef_home: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    fake_model.push(Turn(text="First answer."))
    first = _reef_pi(wrapper_env, work, "-p", "hello")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "First answer."
    # The wrapper started reef serve in the background on the configured port.
    state = serve_process.state_file()
    assert state.exists() and wrapper_env["REEF_SERVE_PORT"] in state.read_text()

    fake_model.push(Turn(text="Second answer."))
    second = _reef_pi(wrapper_env, work, "-p", "hello again")
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "Second answer."
    # The background serve proxied both sessions to the scripted model, as REEF_MODEL says.
    calls = fake_model.inference()
    assert len(calls) == 2 and all(c.body["model"] == "scripted" for c in calls)

    reported = _reef_pi(wrapper_env, work, "report", "--score", "0.8", "--feedback", "good")
    assert reported.returncode == 0, reported.stderr
    found = re.fullmatch(r"report (rep_\w+) stored for (\d+) receipt\(s\)", reported.stdout.strip())
    assert found, reported.stdout

    # Which session was last: the wrapper's agent dir holds both transcripts.
    target = reef_home / "agents" / f"pi-{SCENARIO}"
    sessions = PiAdapter().harvest(target)
    assert len(sessions) == 2
    earlier, last = sessions
    assert earlier.reef_session_id and last.reef_session_id
    assert earlier.reef_session_id != last.reef_session_id

    store = SQLiteStore()
    try:
        records = store.list(limit=None, oldest_first=True)
        mine = [r.id for r in records if r.session_id == last.reef_session_id]
        theirs = [r.id for r in records if r.session_id == earlier.reef_session_id]
        assert len(mine) == 1 and len(theirs) == 1 and len(records) == 2
        [report] = list_reports(store, scenario=SCENARIO)
        refs = [
            row[0]
            for row in store.conn.execute(
                "SELECT record_id FROM report_refs WHERE report_id = ?", (report.id,)
            )
        ]
    finally:
        store.close()
    assert report.id == found[1] and int(found[2]) == 1
    assert report.score == 0.8 and report.feedback == "good"
    assert report.references == mine and sorted(refs) == sorted(mine)
    assert report.metadata == {"agent": "pi", "session_id": last.session_id}
    assert set(refs).isdisjoint(theirs)

    # The same report again is the same report: nothing is added.
    again = _reef_pi(wrapper_env, work, "report", "--score", "0.8", "--feedback", "good")
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"report {report.id} already stored for 1 receipt(s)")
    # Another score on the same receipts is refused in one line, unless --again.
    other = _reef_pi(wrapper_env, work, "report", "--score", "0.1")
    assert other.returncode == 1 and "Traceback" not in other.stderr
    [line] = other.stderr.strip().splitlines()
    assert line.startswith("reef: error: the last session") and "--again" in line
    more = _reef_pi(wrapper_env, work, "report", "--score", "0.1", "--again")
    assert more.returncode == 0, more.stderr
    added = re.fullmatch(r"report (rep_\w+) stored for 1 receipt\(s\)", more.stdout.strip())
    assert added and added[1] != report.id
    store = SQLiteStore()
    try:
        scores = sorted(r.score for r in list_reports(store, scenario=SCENARIO))
    finally:
        store.close()
    assert scores == [0.1, 0.8]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", "abc", ""])
def test_report_score_must_be_a_finite_number(
    wrapper_env: dict[str, str], tmp_path: Path, value: str
) -> None:
    done = _reef_pi(wrapper_env, tmp_path / "work", "report", "--score", value)
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"reef: error: --score {value!r} is not a finite number"), line
    assert not serve_process.state_file().exists()  # refused before anything started


@needs_claude
def test_reef_claude_answers_from_a_fresh_state_dir_without_a_token(
    wrapper_env: dict[str, str], fake_model: FakeModel, reef_home: Path, tmp_path: Path
) -> None:
    """No REEF_TOKEN anywhere: the wrapper's own token (generated in the fresh state dir)
    must reach Claude Code, or serve answers 401 and Claude Code retries for minutes."""
    assert not reef_home.exists() and "REEF_TOKEN" not in wrapper_env
    env = {**wrapper_env, "LANG": "C.UTF-8"}
    fake_model.push(Turn(text="Hello through Reef."))
    done = _run("reef-claude", env, tmp_path / "work", "-p", "hello")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Hello through Reef."
    calls = fake_model.inference()
    assert len(calls) == 1 and calls[0].body["model"] == "scripted"

    # A newer release is served; the session still runs the installed r1 and says so
    # (x-reef-release-id), so its records are credited to r1, not to the served r2.
    publish_files(SCENARIO, tree_files(RULE_R1), reason="a newer release", reviewed=True)
    fake_model.push(Turn(text="Still r1."))
    again = _run("reef-claude", env, tmp_path / "work", "-p", "hello again")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "Still r1."
    target = reef_home / "agents" / f"claude-code-{SCENARIO}"
    assert ClaudeCodeAdapter().installed(target)["release"] == 1  # type: ignore[index]
    store = SQLiteStore()
    try:
        records = store.list(limit=None, oldest_first=True)
    finally:
        store.close()
    assert [r.status for r in records] == [200, 200]
    assert [r.release_id for r in records] == [1, 1]


def test_stop_leaves_a_process_that_is_not_reef_serve_alone(reef_home: Path) -> None:
    """A stale serve.json whose pid now belongs to something else: stop() forgets the
    file and signals nothing."""
    other = subprocess.Popen(["sleep", "30"])
    try:
        reef_home.mkdir(parents=True, exist_ok=True)
        serve_process.state_file().write_text(json.dumps({"pid": other.pid, "url": "x"}))
        assert serve_process.stop(wait=0.5) is True
        assert other.poll() is None and not serve_process.state_file().exists()
        assert serve_process.stop() is False  # nothing recorded any more
    finally:
        other.kill()
        other.wait()


# The agents whose wrappers take the run's arguments as their own headless command: the
# arguments, and what each says before it starts when a newer release waits.
HEADLESS = {
    "codex": ("reef-codex", ["exec", "--skip-git-repo-check", "hello"]),
    "opencode": ("reef-opencode", ["run", "--title", "t", "--", "hello"]),
}


@pytest.mark.parametrize("agent", agent_rig.params(HEADLESS))
def test_the_newer_wrappers_run_report_and_say_an_update_waits(
    wrapper_env: dict[str, str], fake_model: FakeModel, reef_home: Path, tmp_path: Path, agent: str
) -> None:
    """`reef-codex` / `reef-opencode`: a run through the background serve, the next run
    told that a newer release waits (opencode: the wrapper's line; Codex: its SessionStart
    hook, in the model's context), then `report` scores that last session's receipts."""
    wrapper, argv = HEADLESS[agent]
    work = tmp_path / "work"
    fake_model.push(Turn(text="First answer."))
    first = _run(wrapper, wrapper_env, work, *argv)
    assert first.returncode == 0, first.stderr
    assert "First answer." in first.stdout
    publish_files(SCENARIO, tree_files(RULE_R1), reason="a newer release", reviewed=True)
    fake_model.push(Turn(text="Second answer."))
    second = _run(wrapper, wrapper_env, work, *argv)
    assert second.returncode == 0, second.stderr
    if agent == "opencode":
        assert f"r2 available ({wrapper} versions; {wrapper} install 2)" in second.stderr
    else:  # the hook's notice reaches the model with the session's first request
        sent = json.dumps(fake_model.inference()[-1].body, ensure_ascii=False)
        assert "Reef r1 installed — r2 available ($versions 2 install)" in sent
    records = SQLiteStore().list(scenario=SCENARIO, limit=None, oldest_first=True)
    assert [r.release_id for r in records][-1] == 1  # the session still runs the installed r1
    sessions = {r.session_id for r in records}
    assert len(sessions) == 2 and None not in sessions

    reported = _run(wrapper, wrapper_env, work, "report", "--score", "1")
    assert reported.returncode == 0, reported.stderr
    found = re.fullmatch(r"report (rep_\w+) stored for (\d+) receipt\(s\)", reported.stdout.strip())
    assert found, reported.stdout
    store = SQLiteStore()
    try:
        [report] = list_reports(store, scenario=SCENARIO)
    finally:
        store.close()
    last_session = records[-1].session_id
    assert report.references == [r.id for r in records if r.session_id == last_session]

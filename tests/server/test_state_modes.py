"""After a realistic run, nothing in the state dir is open to other users.

Started as a person starts Reef (umask 022): create a scenario, publish, make tokens,
set a setting, record an install and a job, let `reef serve` answer a request, take a
report and a rollback. Then every directory under the state dir is 0700 or tighter and
every file 0600 or tighter: records.sqlite3 and its -wal/-shm, token, tokens.json,
config.toml, jobs/*.json, installs.json, serve.json, serve.log, the chains' git files.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from reef_cli.cli import serve_process
from reef_cli.core import config, installs, jobs, paths, scenarios, tokens
from reef_cli.core.publishing import publish_files
from reef_cli.server.receipts import RECORD_HEADER
from tests.server.conftest import TOKEN, Stack

AUTH = {"authorization": f"Bearer {TOKEN}", "x-reef-scenario": "web"}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "the prompt"}]}


@pytest.fixture
def person_umask(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process as a person starts it: umask 022, not yet tightened by Reef (an earlier
    test in this process may have tightened it)."""
    before = os.umask(0o022)
    monkeypatch.setattr(paths, "_person_umask", None)
    yield
    os.umask(before)


def test_state_dir_is_private_after_a_realistic_flow(
    person_umask: None, make_stack: Callable[..., Stack], tmp_path: Path
) -> None:
    scenarios.create("web", "the web team")
    publish_files("web", {"rules/tests-first.md": "Write the failing test first.\n"}, reason="r")
    tokens.main_token(create=True)
    tokens.create_scoped("ci", ["web"])
    config.set_setting("default_scenario", "web")
    installs.record("web", "pi", tmp_path / "agent", 1, "0" * 64)
    jobs.create("web", "reefine", "answer tersely", None)
    with serve_process.log_file().open("ab") as log:  # as `reef serve` in the background
        log.write(b"reef serve: started\n")
    serve_process.announce("127.0.0.1", 8901, None, True)

    stack = make_stack("openai")
    r = httpx.post(stack.url + "/v1/chat/completions", json=CHAT, headers=AUTH)
    assert r.status_code == 200, r.text
    receipt = r.headers[RECORD_HEADER]
    r = httpx.post(
        stack.url + "/reef/report", json={"score": 1, "references": [receipt]}, headers=AUTH
    )
    assert r.status_code == 201, r.text
    publish_files("web", {"rules/tests-first.md": "Reproduce it first.\n"}, reason="r2")
    r = httpx.post(stack.url + "/reef/scenarios/web/rollback", json={}, headers=AUTH)
    assert r.status_code == 201, r.text
    stack.flush()

    root = stack.home
    names = {p.name for p in root.iterdir()}
    expected = {"records.sqlite3", "records.sqlite3-wal", "records.sqlite3-shm", "token"}
    expected |= {"tokens.json", "config.toml", "installs.json", "jobs", "scenarios", "serve.log"}
    expected |= {"serve.json"}
    assert expected <= names, sorted(expected - names)
    open_to_others = []
    for entry in [root, *root.rglob("*")]:
        info = entry.lstat()
        if stat.S_ISLNK(info.st_mode):
            continue
        if stat.S_IMODE(info.st_mode) & 0o077:
            open_to_others.append(f"{entry.relative_to(root)} {stat.S_IMODE(info.st_mode):o}")
    assert open_to_others == []
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert any(p.is_file() for p in (root / "scenarios" / "web" / "chain.git").rglob("*"))

"""RemoteSync: a replica's served release follows a publish made on another machine.

The replica is this process (its own REEF_HOME); the other machine is a `python -c`
process with a state dir of its own, publishing through the shared bare repository.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from reef_cli.core import remotes, scenarios
from reef_cli.server.release_cache import ReleaseCache
from reef_cli.server.remote_sync import RemoteSync

REPO_ROOT = Path(__file__).resolve().parents[2]
PUBLISH = r"""
import sys
from reef_cli.core import remotes, scenarios
from reef_cli.core.publishing import publish_files
from reef_cli.core.tree import starter_tree

url, reason = sys.argv[1], sys.argv[2]
if not scenarios.list_all():
    remotes.add("demo", url)
files = {**starter_tree().files(), f"rules/{reason}.md": f"# {reason}\n\nFrom elsewhere.\n"}
print(publish_files("demo", files, reason=reason)[0].number)
"""


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    path = tmp_path / "team.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(path)], check=True)
    return path


def publish_elsewhere(tmp_path: Path, remote: Path, reason: str) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REEF_")}
    env["REEF_HOME"] = str(tmp_path / "elsewhere")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", PUBLISH, str(remote), reason],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return int(done.stdout.strip())


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_the_replica_serves_a_release_published_elsewhere(tmp_path: Path, remote: Path) -> None:
    assert publish_elsewhere(tmp_path, remote, "first") == 1
    remotes.add("demo", str(remote))  # the replica joins: it has r1 now
    cache = ReleaseCache(3600)  # the safety-net reload never fires: only the ref file counts
    assert asyncio.run(cache.get("demo")) == 1

    sync = RemoteSync(interval=0.05)
    sync.start()
    try:
        assert publish_elsewhere(tmp_path, remote, "second") == 2
        chain = scenarios.get("demo").chain()
        wait_for(lambda: chain.head() == remotes.rev(remote, "refs/reef/chain"), "the pull")
        assert asyncio.run(cache.get("demo")) == 2
        assert [r.meta.reason for r in chain.releases()] == ["first", "second"]
    finally:
        sync.stop()
    assert sync._thread is None


def test_errors_are_logged_once_per_change_without_secrets(
    tmp_path: Path, remote: Path, caplog: pytest.LogCaptureFixture
) -> None:
    publish_elsewhere(tmp_path, remote, "first")
    remotes.add("demo", str(remote))
    scenarios.create("alone")  # no remote: never pulled
    git_dir = scenarios.get("demo").chain_dir
    secret = "https://me:s3cret@127.0.0.1:9/team.git"
    subprocess.run(["git", "--git-dir", str(git_dir), "config", "remote.reef.url", secret])
    sync = RemoteSync(interval=3600)
    with caplog.at_level(logging.INFO, logger="reef.serve"):
        for _ in range(3):
            result = sync.run_once()
            assert list(result) == ["demo"] and "cannot fetch" in result["demo"]
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "pulling demo failed" in warnings[0].getMessage()
        subprocess.run(["git", "--git-dir", str(git_dir), "config", "remote.reef.url", str(remote)])
        assert sync.run_once() == {"demo": "up to date"}
        assert sync.run_once() == {"demo": "up to date"}
    assert "s3cret" not in caplog.text and "***@127.0.0.1:9" in caplog.text
    assert [r.getMessage() for r in caplog.records].count("chain remote: demo pulls again") == 1


def test_a_diverged_replica_keeps_its_chain(tmp_path: Path, remote: Path) -> None:
    publish_elsewhere(tmp_path, remote, "first")
    remotes.add("demo", str(remote))
    remotes.remove("demo")
    from reef_cli.core.publishing import publish_files
    from reef_cli.core.tree import starter_tree

    publish_files("demo", {**starter_tree().files(), "rules/mine.md": "# mine\n\nx\n"}, reason="m")
    head = scenarios.get("demo").chain().head()
    publish_elsewhere(tmp_path, remote, "theirs")
    git_dir = scenarios.get("demo").chain_dir
    subprocess.run(["git", "--git-dir", str(git_dir), "config", "remote.reef.url", str(remote)])
    result = RemoteSync().run_once()
    assert "diverged" in result["demo"]
    assert scenarios.get("demo").chain().head() == head

"""`reef scenario remote add|show|remove`, `reef scenario push|pull`: two state dirs, one
bare repository, the real CLI."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.helpers import reef, reef_fails, reef_json

Use = Callable[[str], None]  # makes one of two state dirs the current REEF_HOME


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    path = tmp_path / "team.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(path)], check=True)
    return path


@pytest.fixture
def use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Use:
    def switch(side: str) -> None:
        monkeypatch.setenv("REEF_HOME", str(tmp_path / f"home-{side}"))

    return switch


def publish(tmp_path: Path, name: str, reason: str) -> None:
    root = tmp_path / f"tree-{name}"
    if not root.exists():
        reef("harness", "init", str(root))
    (root / "rules" / f"{name}.md").write_text(f"# {name}\n\nA rule named {name}.\n")
    reef("harness", "publish", str(root), "-s", "demo", "-m", reason)


def test_add_publish_pull_show_remove(tmp_path: Path, remote: Path, use: Use) -> None:
    use("a")
    out = reef("scenario", "remote", "add", "demo", str(remote))
    assert f"Chain remote of demo: {remote} (scenario created here)" in out
    assert "chain: empty here and on the remote" in out
    publish(tmp_path, "one", "from a")

    use("b")
    out = reef("scenario", "remote", "add", "demo", str(remote))
    assert "chain: fast-forwarded empty -> r1" in out
    publish(tmp_path, "two", "from b")

    use("a")
    shown = reef_json("scenario", "remote", "show", "demo")
    assert shown["url"] == str(remote) and shown["refs"]["chain"] == {
        "local": 1,
        "remote": 1,
        "state": "same",
    }  # as last fetched: show does not touch the network
    pulled = reef_json("scenario", "pull", "demo")
    assert pulled["refs"]["chain"] == {
        "local": 2,
        "remote": 2,
        "state": "fast-forwarded",
        "before": 1,
    }
    assert "chain: up to date at r2" in reef("scenario", "pull", "demo")
    assert "chain: up to date at r2" in reef("scenario", "push", "demo")
    assert reef_json("scenario", "show", "demo")["releases"] == 2

    assert f"Removed the chain remote of demo ({remote})" in reef(
        "scenario", "remote", "remove", "demo"
    )
    line = reef_fails("scenario", "pull", "demo")
    assert "no chain remote" in line and "reef scenario remote add demo URL" in line


def test_push_of_releases_made_before_the_remote(tmp_path: Path, remote: Path, use: Use) -> None:
    use("a")
    reef("scenario", "create", "demo")
    publish(tmp_path, "one", "offline")
    out = reef("scenario", "remote", "add", "demo", str(remote))
    assert "chain: local r1 is ahead of the remote's empty: run `reef scenario push demo`" in out
    assert "chain: pushed r1" in reef("scenario", "push", "demo")
    listed = subprocess.run(
        ["git", "ls-remote", str(remote)], capture_output=True, text=True, check=True
    ).stdout
    assert "refs/reef/chain" in listed and "refs/tags/r1" in listed


def test_bad_urls_are_one_line_errors(tmp_path: Path, use: Use) -> None:
    use("a")
    line = reef_fails("scenario", "remote", "add", "demo", str(tmp_path / "nowhere.git"), code=3)
    assert "is not a git repository Reef can reach" in line and "git init --bare" in line
    line = reef_fails("scenario", "remote", "show", "demo")
    assert "unknown scenario 'demo'" in line  # a bad URL created nothing
    line = reef_fails(
        "scenario", "remote", "add", "demo", "https://me:s3cret@127.0.0.1:9/x.git", code=3
    )
    assert "s3cret" not in line and "https://***@127.0.0.1:9/x.git" in line


def test_diverged_pull_and_stale_push_are_conflicts(tmp_path: Path, remote: Path, use: Use) -> None:
    use("a")
    reef("scenario", "create", "demo")
    publish(tmp_path, "one", "a offline")
    reef("scenario", "remote", "add", "demo", str(remote))
    use("b")
    reef("scenario", "remote", "add", "demo", str(remote))
    publish(tmp_path, "two", "b through the remote")

    use("a")
    before = reef_json("harness", "versions", "-s", "demo")
    line = reef_fails("scenario", "push", "demo", code=4)
    assert "moved since the last fetch" in line and "reef scenario pull demo" in line
    line = reef_fails("scenario", "pull", "demo", code=4)
    assert "have diverged from the start" in line and "never rewrites local history" in line
    assert reef_json("harness", "versions", "-s", "demo") == before


def test_json_is_plain(remote: Path, use: Use) -> None:
    use("a")
    data = json.loads(reef("scenario", "remote", "add", "demo", str(remote), "--json"))
    assert data == {
        "scenario": "demo",
        "remote": "reef",
        "url": str(remote),
        "created": True,
        "replaced": None,
        "refs": {
            "chain": {"local": None, "remote": None, "state": "empty"},
            "weights": {"local": None, "remote": None, "state": "empty"},
        },
    }

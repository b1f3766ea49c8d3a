"""The release chain under real concurrency and real crashes.

(a) Eight OS processes publish distinct trees to one scenario at the same moment (they
wait on a start file, so they really race). The chain must end up 1..N with every
successful publish in it exactly once and nothing else.

(b) A publisher is SIGKILLed (with its git children) at random points while writing
trees of ~50 files. The chain must stay readable and gap-free, every release must match
its own content hash, ``git fsck`` must find nothing broken, and publishing must go on.
"""

from __future__ import annotations

import collections
import contextlib
import inspect
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from reef_cli.core import scenarios
from reef_cli.core.releases import Chain
from reef_cli.core.tree import content_hash, parse_files

REPO_ROOT = Path(__file__).resolve().parents[2]
SCENARIO = "race"


def tree_for(worker: int, index: int, n_rules: int = 3, size: int = 60) -> dict[str, str]:
    """A valid harness tree unique to (worker, index), the same in every process."""
    import random as _random

    rng = _random.Random(f"{worker}/{index}")
    words = ["read", "test", "small", "change", "explain", "review", "diff", "name", "fix"]

    def prose(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n))

    files = {
        "reef.toml": "format = 1\n",
        f"skills/worker-{worker}/SKILL.md": (
            f"---\nname: worker-{worker}\ndescription: Skill of worker {worker}, "
            f"publish {index}.\n---\n{prose(size)}\n"
        ),
    }
    for rule in range(n_rules):
        files[f"rules/w{worker}-p{index}-r{rule}.md"] = f"# Rule {rule}\n\n{prose(size)}\n"
    return files


TREE_SOURCE = textwrap.dedent(inspect.getsource(tree_for))


def child_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REEF_")}
    env["REEF_HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def git(git_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True, check=False
    )


def wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def assert_tags_match(chain: Chain) -> None:
    releases = chain.releases()
    tags = git(
        chain.git_dir, "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/tags"
    )
    found = dict(line.split() for line in tags.stdout.splitlines())
    assert found == {r.tag: r.commit for r in releases}


def assert_well_formed(chain: Chain) -> list:  # type: ignore[type-arg]
    """Numbers 1..N, parents linked, and each release's files match its content hash."""
    releases = chain.releases()
    assert [r.number for r in releases] == list(range(1, len(releases) + 1))
    previous = None
    for release in releases:
        assert release.meta.parent == (previous.number if previous else None)
        parents = git(chain.git_dir, "rev-parse", f"{release.commit}^@").stdout.split()
        assert parents == ([previous.commit] if previous else [])
        files = chain.files(release)
        parse_files(files)  # a valid harness tree, every file decodes and parses
        assert content_hash(files) == release.meta.content_hash, release.tag
        previous = release
    return releases


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "reef-home"
    monkeypatch.setenv("REEF_HOME", str(path))
    return path


# ---------------------------------------------------------------- (a) eight racing processes

RACER = r"""
import json, sys, time
from pathlib import Path
from reef_cli.core import scenarios
from reef_cli.core.errors import ChainConflict

{tree_source}

worker, count = int(sys.argv[1]), int(sys.argv[2])
ready, start = Path(sys.argv[3]), Path(sys.argv[4])
chain = scenarios.get({scenario!r}).chain()
chain.head()  # open the repository before the race starts
ready.touch()
while not start.exists():
    time.sleep(0.0005)
for index in range(count):
    began = time.time()
    try:
        release = chain.publish(tree_for(worker, index), reason=f"w{{worker}} p{{index}}")
    except ChainConflict as exc:
        out = {{"ok": False, "error": type(exc).__name__, "message": exc.message, "hint": exc.hint}}
    else:
        out = {{"ok": True, "number": release.number, "commit": release.commit,
               "hash": release.meta.content_hash}}
    out.update(worker=worker, index=index, began=began)
    print(json.dumps(out), flush=True)
"""

WORKERS = 8
PUBLISHES = 4


def test_eight_processes_racing_keep_the_chain_whole(home: Path, tmp_path: Path) -> None:
    scenario = scenarios.create(SCENARIO)
    script = RACER.format(tree_source=TREE_SOURCE, scenario=SCENARIO)
    start = tmp_path / "start"
    procs = []
    for worker in range(WORKERS):
        procs.append(
            subprocess.Popen(
                [
                    *(sys.executable, "-c", script, str(worker), str(PUBLISHES)),
                    *(str(tmp_path / f"ready-{worker}"), str(start)),
                ],
                env=child_env(home),
                cwd=REPO_ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    try:
        wait_for(
            lambda: (
                all((tmp_path / f"ready-{w}").exists() for w in range(WORKERS))
                or any(p.poll() is not None for p in procs)
            ),
            60,
            "the racers to get ready",
        )
        start.touch()
        outputs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for proc, (_, stderr) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, stderr[-3000:]
    results = [json.loads(line) for stdout, _ in outputs for line in stdout.splitlines()]
    assert len(results) == WORKERS * PUBLISHES
    # they really raced: every worker's first publish began within the same instant
    first = [r["began"] for r in results if r["index"] == 0]
    assert max(first) - min(first) < 5.0

    wins = [r for r in results if r["ok"]]
    losses = [r for r in results if not r["ok"]]
    for loss in losses:
        assert loss["error"] == "ChainConflict"
        assert "another publisher" in loss["message"] and "gave up after" in loss["message"]
        assert loss["hint"] and "again" in loss["hint"]

    chain = scenario.chain()
    releases = assert_well_formed(chain)
    assert len(releases) == len(wins) > 0
    assert sorted(w["number"] for w in wins) == list(range(1, len(wins) + 1))

    by_number = {r.number: r for r in releases}
    for win in wins:
        release = by_number[win["number"]]
        expected = tree_for(win["worker"], win["index"])
        assert release.commit == win["commit"]
        assert release.meta.content_hash == win["hash"] == content_hash(expected)
        assert chain.files(release) == expected
        assert release.meta.reason == f"w{win['worker']} p{win['index']}"

    hashes = collections.Counter(r.meta.content_hash for r in releases)
    assert set(hashes.values()) == {1}  # every content exactly once
    assert set(hashes) == {w["hash"] for w in wins}
    for loss in losses:  # a lost publish left nothing behind in the chain
        assert content_hash(tree_for(loss["worker"], loss["index"])) not in hashes

    assert_tags_match(chain)
    assert not (chain.git_dir / "refs/reef/chain.lock").exists()
    print(f"race: {len(wins)} published, {len(losses)} ChainConflict")


# ---------------------------------------------------------------- (b) SIGKILL mid-publish

PUBLISHER = r"""
import sys, time
from pathlib import Path
from reef_cli.core import scenarios
from reef_cli.core.errors import ChainConflict

{tree_source}

round_, ready = int(sys.argv[1]), Path(sys.argv[2])
chain = scenarios.get({scenario!r}).chain()
chain.head()
ready.touch()
index = 0
while True:
    try:
        chain.publish(tree_for(1000 + round_, index, n_rules=48, size=300))
    except ChainConflict:
        pass
    index += 1
"""

KILLS = 15


def test_sigkill_at_random_points_leaves_a_whole_chain(home: Path, tmp_path: Path) -> None:
    scenario = scenarios.create(SCENARIO)
    script = PUBLISHER.format(tree_source=TREE_SOURCE, scenario=SCENARIO)
    rng = random.Random()
    delays = []
    for round_ in range(KILLS):
        ready = tmp_path / f"ready-{round_}"
        proc = subprocess.Popen(
            [sys.executable, "-c", script, str(round_), str(ready)],
            env=child_env(home),
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: git children die with it
        )
        try:
            wait_for(lambda r=ready, p=proc: r.exists() or p.poll() is not None, 60, "publisher")
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]  # type: ignore[union-attr]
            delays.append(rng.uniform(0.0, 0.3))
            time.sleep(delays[-1])
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            proc.stderr.close()  # type: ignore[union-attr]
        assert proc.returncode == -signal.SIGKILL

    chain = Chain(scenario.chain_dir)
    releases = assert_well_formed(chain)
    for release in releases:
        assert len(chain.files(release)) == 50

    leftovers = [p.name for p in (chain.git_dir / "objects").iterdir() if p.is_file()]
    print(f"sigkill: {len(releases)} releases survived {KILLS} kills; temp files {leftovers}")
    fsck = git(chain.git_dir, "fsck", "--full", "--strict", "--no-dangling")
    report = (fsck.stdout + fsck.stderr).lower()
    assert fsck.returncode == 0, report
    for word in ("error", "missing", "broken", "corrupt", "bad ", "fatal"):
        assert word not in report, report

    lock = chain.git_dir / "refs/reef/chain.lock"
    # git runs in a session of its own: a publisher's death lets it finish, lock and all.
    with contextlib.suppress(AssertionError):
        wait_for(lambda: not lock.exists(), 10, "the last git update-ref")
    assert not lock.exists(), (
        "a killed `git update-ref` left refs/reef/chain.lock behind; publishes fail with "
        "ChainConflict until it is 30 s old"
    )
    after = chain.publish(tree_for(9999, 0))
    assert after.number == len(releases) + 1
    assert chain.files(after) == tree_for(9999, 0)
    assert_well_formed(chain)
    assert_tags_match(chain)

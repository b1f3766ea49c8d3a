"""Chain remotes on real git: state dirs ("machines") sharing one bare repository.

Most tests switch ``REEF_HOME`` between two state dirs inside this process (every Reef
lookup reads it afresh); the race runs two OS processes, one per state dir, each
publishing 20 times at the same moment as the other.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reef_cli.core import remotes, scenarios
from reef_cli.core.errors import ChainConflict, ChainDiverged, RemoteError, RemoteNotSet
from reef_cli.core.publishing import publish_files
from reef_cli.core.releases import CHAIN_REF, WEIGHTS_REF, Chain
from reef_cli.core.tree import starter_tree

REPO_ROOT = Path(__file__).resolve().parents[2]
BASE = starter_tree().files()


def tree(name: str) -> dict[str, str]:
    return {**BASE, f"rules/{name}.md": f"# {name}\n\nA rule named {name}.\n"}


def git(git_dir: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    path = tmp_path / "shared" / "team.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(path)], check=True)
    return path


class Machines:
    """Two state dirs, ``a`` and ``b``; ``use(side)`` makes one the current REEF_HOME."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.homes = {side: root / f"home-{side}" for side in ("a", "b")}
        self.monkeypatch = monkeypatch

    def use(self, side: str) -> None:
        self.monkeypatch.setenv("REEF_HOME", str(self.homes[side]))

    def chain(self, side: str, name: str = "demo") -> Chain:
        return Chain(self.homes[side] / "scenarios" / name / "chain.git")


@pytest.fixture
def machines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Machines:
    return Machines(tmp_path, monkeypatch)


def reasons(chain: Chain) -> list[str]:
    return [r.meta.reason for r in chain.releases()]


def tags(git_dir: Path, prefix: str = "r") -> dict[str, str]:
    out = git(git_dir, "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/tags")
    pairs = (line.split() for line in out.splitlines())
    return {name: sha for name, sha in pairs if name.startswith(prefix)}


# ---------------------------------------------------------------- add, publish, pull


def test_a_publish_with_a_remote_reaches_the_other_machine(
    machines: Machines, remote: Path
) -> None:
    machines.use("a")
    added = remotes.add("demo", str(remote))
    assert added["created"] and added["refs"]["chain"].state == "empty"
    publish_files("demo", tree("one"), reason="a1")
    publish_files("demo", tree("two"), reason="a2")
    a = machines.chain("a")
    assert git(remote, "rev-parse", CHAIN_REF) == a.head()  # pushed before the local ref moved
    assert tags(remote) == tags(a.git_dir) == {r.tag: r.commit for r in a.releases()}

    machines.use("b")
    added = remotes.add("demo", str(remote))
    assert added["created"] and added["refs"]["chain"].state == "fast-forwarded"
    b = machines.chain("b")
    assert [r.commit for r in b.releases()] == [r.commit for r in a.releases()]
    assert tags(b.git_dir) == tags(a.git_dir)  # local tags repaired after the fast-forward
    r3, _ = publish_files("demo", tree("three"), reason="b3")
    assert r3.number == 3

    machines.use("a")
    pulled = remotes.pull("demo")
    assert pulled["chain"].state == "fast-forwarded"
    assert (pulled["chain"].before, pulled["chain"].local) == (2, 3)
    assert reasons(a) == ["a1", "a2", "b3"] and a.head() == b.head()
    assert remotes.pull("demo")["chain"].state == "same"
    shown = remotes.show("demo")
    assert shown["url"] == str(remote) and shown["refs"]["chain"].local == 3


def test_publish_catches_up_with_the_remote_first(machines: Machines, remote: Path) -> None:
    machines.use("a")
    remotes.add("demo", str(remote))
    publish_files("demo", tree("one"), reason="a1")
    machines.use("b")
    remotes.add("demo", str(remote))
    publish_files("demo", tree("two"), reason="b2")
    machines.use("a")  # a has not pulled: its publish fetches and builds on b's r2
    r3, _ = publish_files("demo", tree("three"), reason="a3")
    assert r3.number == 3 and r3.meta.parent == 2
    assert reasons(machines.chain("a")) == ["a1", "b2", "a3"]
    assert git(remote, "rev-parse", CHAIN_REF) == machines.chain("a").head()


def test_an_unreachable_remote_fails_a_publish_and_writes_nothing(
    machines: Machines, remote: Path
) -> None:
    machines.use("a")
    remotes.add("demo", str(remote))
    publish_files("demo", tree("one"), reason="a1")
    head = machines.chain("a").head()
    moved = remote.with_name("moved.git")
    remote.rename(moved)
    with pytest.raises(RemoteError, match="cannot fetch from the chain remote"):
        publish_files("demo", tree("two"), reason="a2")
    assert machines.chain("a").head() == head
    moved.rename(remote)
    assert publish_files("demo", tree("two"), reason="a2")[0].number == 2


# ---------------------------------------------------------------- history is never rewritten


def diverge(machines: Machines, remote: Path) -> tuple[str, str]:
    """a and b share r1; then b publishes r2 without the remote and a publishes its own r2
    through it. Returns (b's local head, the remote's head)."""
    machines.use("a")
    remotes.add("demo", str(remote))
    publish_files("demo", tree("one"), reason="a1")
    machines.use("b")
    remotes.add("demo", str(remote))
    remotes.remove("demo")
    publish_files("demo", tree("mine"), reason="b2 offline")
    machines.use("a")
    publish_files("demo", tree("theirs"), reason="a2")
    machines.use("b")
    return machines.chain("b").head() or "", git(remote, "rev-parse", CHAIN_REF)


def test_pull_never_rewrites_local_history(machines: Machines, remote: Path) -> None:
    local, theirs = diverge(machines, remote)
    b = machines.chain("b")
    before = tags(b.git_dir)
    with pytest.raises(ChainDiverged, match=r"remote added, but .*diverged since r1"):
        remotes.add("demo", str(remote))
    for attempt in (
        lambda: remotes.pull("demo"),
        lambda: publish_files("demo", tree("x"), reason="x"),
    ):
        with pytest.raises(ChainDiverged, match="never rewrites local history") as caught:
            attempt()
        assert caught.value.hint and "reef scenario delete" in caught.value.hint
        assert b.head() == local and tags(b.git_dir) == before
        assert reasons(b) == ["a1", "b2 offline"]
    assert git(remote, "rev-parse", CHAIN_REF) == theirs  # nor the remote's
    with pytest.raises(ChainDiverged):
        remotes.push("demo")
    assert git(remote, "rev-parse", CHAIN_REF) == theirs


def test_push_is_refused_when_the_remote_moved_since_the_last_fetch(
    machines: Machines, remote: Path
) -> None:
    machines.use("a")
    scenarios.create("demo")
    publish_files("demo", tree("one"), reason="a1")
    publish_files("demo", tree("two"), reason="a2")
    assert remotes.add("demo", str(remote))["refs"]["chain"].state == "ahead"
    machines.use("b")
    remotes.add("demo", str(remote))
    publish_files("demo", tree("other"), reason="b1")
    theirs = git(remote, "rev-parse", CHAIN_REF)

    machines.use("a")  # its lease says "the remote has no chain": stale now
    with pytest.raises(ChainConflict, match="moved since the last fetch") as caught:
        remotes.push("demo")
    assert not isinstance(caught.value, ChainDiverged)
    assert "reef scenario pull demo" in (caught.value.hint or "")
    assert git(remote, "rev-parse", CHAIN_REF) == theirs
    assert "r2" not in tags(remote)
    assert reasons(machines.chain("a")) == ["a1", "a2"]


def test_push_sends_what_the_remote_lacks(machines: Machines, remote: Path) -> None:
    machines.use("a")
    scenarios.create("demo")
    for name in ("one", "two"):
        publish_files("demo", tree(name), reason=name)
    remotes.add("demo", str(remote))
    pushed = remotes.push("demo")
    assert pushed["chain"].state == "pushed" and pushed["chain"].remote == 2
    assert tags(remote) == tags(machines.chain("a").git_dir)
    assert remotes.push("demo")["chain"].state == "same"
    assert remotes.show("demo")["refs"]["chain"].state == "same"


# ---------------------------------------------------------------- URLs and errors


def test_a_bad_url_is_a_clear_error_and_creates_nothing(machines: Machines, tmp_path: Path) -> None:
    machines.use("a")
    for url in (str(tmp_path / "nowhere.git"), "file:///nonexistent/x.git", "  "):
        with pytest.raises(RemoteError) as caught:
            remotes.add("demo", url)
        assert caught.value.hint
        assert "\n" not in caught.value.one_line()
    with pytest.raises(scenarios.ScenarioNotFound):
        scenarios.get("demo")
    scenarios.create("demo")
    with pytest.raises(RemoteNotSet, match="no chain remote"):
        remotes.pull("demo")
    with pytest.raises(RemoteError, match="its own remote"):
        remotes.add("demo", str(machines.chain("a").git_dir))


def test_urls_are_shown_without_passwords() -> None:
    assert remotes.redact("https://me:s3cret@git.example/x.git") == "https://***@git.example/x.git"
    assert remotes.redact("https://ghp_token@git.example/x") == "https://***@git.example/x"
    assert remotes.redact("ssh://git@host/x.git") == "ssh://git@host/x.git"
    assert remotes.redact("git@host:team/x.git") == "git@host:team/x.git"
    assert remotes.normalize("host:team/x.git") == "host:team/x.git"
    assert remotes.normalize("relative/x.git") == str(Path("relative/x.git").resolve())


# ---------------------------------------------------------------- weights and their LFS objects


def test_weight_releases_and_their_lfs_objects_reach_the_other_machine(
    machines: Machines, tmp_path: Path
) -> None:
    """On a shared disk (``git init --bare --shared=group``): git-lfs 3.3 would hard-link
    Reef's private 0600 objects into the remote; the remote gets group-readable copies."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    if shutil.which("git-lfs") is None:
        pytest.skip("git-lfs is not installed")
    from reefd.weights import WeightChain

    remote = tmp_path / "shared" / "team.git"
    subprocess.run(["git", "init", "-q", "--bare", "--shared=group", str(remote)], check=True)

    machines.use("a")
    w1_tensors = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}
    a = WeightChain.for_scenario("demo", create=True)
    w1 = a.publish(w1_tensors, base_model="tiny", kind="full", reason="w1 before the remote")
    remotes.add("demo", str(remote))
    assert remotes.push("demo")["weights"].state == "pushed"  # git lfs push, then the ref
    w2_tensors = {"w": torch.ones(2, 3)}
    w2 = a.publish(w2_tensors, base_model="tiny", kind="full", reason="w2 through the remote")
    for release in (w1, w2):
        (pointer,) = a.pointers(release).values()
        shipped = remote / "lfs" / "objects" / pointer.oid[:2] / pointer.oid[2:4] / pointer.oid
        mine = a.object_path(pointer.oid)
        assert shipped.read_bytes() == mine.read_bytes()
        assert shipped.stat().st_ino != mine.stat().st_ino  # its own copy, not a hard link
        assert shipped.stat().st_mode & 0o777 == 0o640 and mine.stat().st_mode & 0o777 == 0o600
        assert shipped.parent.stat().st_mode & 0o2770 == 0o2770  # teammates add objects too
    assert git(remote, "rev-parse", WEIGHTS_REF) == w2.commit

    machines.use("b")
    pulled = remotes.add("demo", str(remote))["refs"]
    assert pulled["weights"].state == "fast-forwarded" and pulled["weights"].local == 2
    b = WeightChain.for_scenario("demo")
    assert [r.commit for r in b.releases()] == [w1.commit, w2.commit]
    assert tags(b.chain.git_dir, "w") == {"w1": w1.commit, "w2": w2.commit}
    for release, expected in ((w1, w1_tensors), (w2, w2_tensors)):
        loaded = b.load(b.get(release.number))  # every sha256 checked on the way
        assert torch.equal(loaded["w"], expected["w"])


# ---------------------------------------------------------------- two machines racing

RACER = r"""
import json, sys, time
from pathlib import Path
from reef_cli.core import scenarios
from reef_cli.core.errors import ChainConflict
from reef_cli.core.publishing import publish_files
from reef_cli.core.tree import starter_tree

side, count, ready, start = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
base = starter_tree().files()
scenarios.get("team").chain().head()
ready.touch()
while not start.exists():
    time.sleep(0.0005)
for index in range(count):
    reason = f"{side}-{index}"
    files = {**base, f"rules/{reason}.md": f"# {reason}\n\nPublished by {reason}.\n"}
    try:
        release, _ = publish_files("team", files, reason=reason)
    except ChainConflict as exc:
        out = {"ok": False, "error": type(exc).__name__, "message": exc.message}
    else:
        out = {"ok": True, "number": release.number, "commit": release.commit}
    out["reason"] = reason
    print(json.dumps(out), flush=True)
"""
PUBLISHES = 20


def child_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REEF_")}
    env["REEF_HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def test_two_state_dirs_publishing_at_once_keep_one_contiguous_chain(
    machines: Machines, remote: Path, tmp_path: Path
) -> None:
    for side in ("a", "b"):
        machines.use(side)
        remotes.add("team", str(remote))
    start = tmp_path / "start"
    procs = {
        side: subprocess.Popen(
            [
                *(sys.executable, "-c", RACER, side, str(PUBLISHES)),
                *(str(tmp_path / f"ready-{side}"), str(start)),
            ],
            env=child_env(machines.homes[side]),
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for side in ("a", "b")
    }
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"ready-{s}").exists() for s in procs):
            assert all(p.poll() is None for p in procs.values()), "a racer died before the start"
            assert time.monotonic() < deadline, "the racers never got ready"
            time.sleep(0.01)
        start.touch()
        outputs = {side: p.communicate(timeout=120) for side, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    for side, proc in procs.items():
        assert proc.returncode == 0, outputs[side][1][-3000:]
    results = [json.loads(ln) for out, _ in outputs.values() for ln in out.splitlines()]
    assert len(results) == 2 * PUBLISHES
    wins = [r for r in results if r["ok"]]
    losses = [r for r in results if not r["ok"]]
    for loss in losses:  # a failure is only ever a clear conflict
        assert loss["error"] == "ChainConflict" and "gave up after" in loss["message"]

    shared = Chain(remote)
    releases = shared.releases()  # raises unless numbered 1..N along first parents
    assert len(releases) == len(wins) > PUBLISHES
    assert {r["reason"][0] for r in wins} == {"a", "b"}  # both machines got releases in
    counted = collections.Counter(r.meta.reason for r in releases)
    assert set(counted.values()) == {1} and set(counted) == {w["reason"] for w in wins}
    by_number = {r.number: r for r in releases}
    for win in wins:
        assert by_number[win["number"]].commit == win["commit"]
        assert by_number[win["number"]].meta.reason == win["reason"]
    for previous, release in itertools.pairwise(releases):
        assert git(remote, "rev-parse", f"{release.commit}^@").split() == [previous.commit]
    assert tags(remote) == {r.tag: r.commit for r in releases}

    for side in ("a", "b"):  # a pull on each side converges
        machines.use(side)
        remotes.pull("team")
        local = machines.chain(side, "team")
        assert local.head() == shared.head()
        assert [r.commit for r in local.releases()] == [r.commit for r in releases]
        assert tags(local.git_dir) == tags(remote)
    print(f"remote race: {len(wins)} published, {len(losses)} ChainConflict")

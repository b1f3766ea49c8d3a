from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from reef_cli.core import scenarios
from reef_cli.core.errors import ChainCorrupt, GateBlocked, ReleaseNotFound
from reef_cli.core.publishing import publish_files, republish, rollback
from reef_cli.core.releases import CHAIN_REF, Release, ReleaseMeta
from reef_cli.core.tree import starter_tree

BASE = starter_tree().files()


def tree_with(**rules: str) -> dict[str, str]:
    return {**BASE, **{f"rules/{k}.md": v for k, v in rules.items()}}


@pytest.fixture
def chain():  # type: ignore[no-untyped-def]
    return scenarios.create("demo").chain()


def test_publish_numbers_parent_hash_and_tags(chain) -> None:  # type: ignore[no-untyped-def]
    r1, verdict = publish_files("demo", BASE, reason="first")
    r2, _ = publish_files("demo", tree_with(extra="x\n"), reason="second")
    assert (r1.number, r2.number) == (1, 2)
    assert r2.meta.parent == 1 and r1.meta.parent is None
    assert verdict.verdict == "passed"
    assert r2.meta.gate["verdict"] == "passed"
    assert chain.files(r2)["rules/extra.md"] == "x\n"
    assert chain.files(r1) == BASE
    tags = subprocess.run(
        ["git", "--git-dir", str(chain.git_dir), "tag"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert tags == ["r1", "r2"]
    assert [r.number for r in chain.releases()] == [1, 2]


def test_rollback_publishes_a_new_release_with_old_content(chain) -> None:  # type: ignore[no-untyped-def]
    publish_files("demo", BASE, reason="first")
    publish_files("demo", tree_with(extra="x\n"), reason="second")
    r3, _ = republish("demo", "1", source="rollback", reason="")
    assert r3.number == 3
    assert r3.meta.points_to == 1 and r3.meta.source == "rollback"
    assert r3.meta.reason == "rollback to r1"
    assert chain.files(r3) == chain.files(chain.get(1))
    assert r3.meta.content_hash == chain.get(1).meta.content_hash


def test_rollback_target_is_the_release_served_before_the_current_one(chain) -> None:  # type: ignore[no-untyped-def]
    """``Chain.rollback_target``: the one rule for a rollback that names no release (the CLI
    without RELEASE, the API without ``to``)."""
    with pytest.raises(ReleaseNotFound, match="no releases yet"):
        chain.rollback_target()
    chain.publish({"rules/a.md": "A\n"}, status="pending")
    with pytest.raises(ReleaseNotFound, match="no release is live yet"):
        chain.rollback_target()  # r1 was never served
    chain.publish({"rules/a.md": "A\n"})  # r2 A, served
    with pytest.raises(ReleaseNotFound, match="no earlier release to roll back to"):
        chain.rollback_target()  # r1 is pending (and has r2's content)
    chain.publish({"rules/a.md": "B\n"})  # r3 B
    assert chain.rollback_target().number == 2  # not r1: never served
    chain.publish({"rules/a.md": "C\n"}, status="pending")  # r4 C: a proposal
    assert chain.served().number == 3 and chain.resolve("previous").number == 3
    assert chain.rollback_target().number == 2  # the proposal is skipped, served is r3
    r5, _ = rollback("demo")  # r5: r2's content (A)
    assert r5.meta.points_to == 2 and r5.meta.source == "rollback"
    assert r5.meta.reason == "rollback to r2"
    # rolling back again undoes the rollback: r3 (B), served before r5
    assert chain.rollback_target().number == 3
    chain.publish({"rules/a.md": "A\n"})  # r6: A again, the same content as served r5
    assert chain.rollback_target().number == 3  # r5 would change nothing: skipped
    r7, _ = rollback("demo", "r1", reason="named")  # a named release is taken as named
    assert r7.meta.points_to == 1 and r7.meta.reason == "named"


def test_extensions_publish_pending_until_promoted(chain) -> None:  # type: ignore[no-untyped-def]
    publish_files("demo", BASE, reason="first")
    files = {**BASE, "extensions/notify.ts": "export default function () {}\n"}
    r2, verdict = publish_files("demo", files, reason="adds code")
    assert verdict.verdict == "pending" and r2.meta.status == "pending"
    assert chain.served().number == 1
    r3, _ = republish("demo", "2", source="promote", reason="reviewed")
    assert r3.meta.status == "live" and chain.served().number == 3


def test_resolve_specs(chain) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ReleaseNotFound, match="no releases yet"):
        chain.resolve("latest")
    for text in ("a\n", "b\n", "c\n"):
        publish_files("demo", tree_with(x=text), reason=text)
    assert chain.resolve("latest").number == 3
    assert chain.resolve("previous").number == 2
    assert chain.resolve("r1").number == 1
    assert chain.resolve("2").number == 2
    assert chain.resolve("installed", installed=1).number == 1
    for bad in ("r9", "0", "banana", "installed"):
        with pytest.raises(ReleaseNotFound):
            chain.resolve(bad)


def test_blocked_publish_leaves_the_chain_unchanged(chain) -> None:  # type: ignore[no-untyped-def]
    publish_files("demo", BASE, reason="first")
    head = chain.head()
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    with pytest.raises(GateBlocked) as info:
        publish_files("demo", tree_with(leak=f"token {secret}\n"), reason="leak")
    assert secret not in info.value.one_line()
    assert "rules/leak.md:1" in info.value.one_line()
    assert chain.head() == head


def test_not_a_git_repo_is_reported_and_left_alone(chain) -> None:  # type: ignore[no-untyped-def]
    git_dir: Path = chain.git_dir
    subprocess.run(["rm", "-rf", str(git_dir)], check=True)
    git_dir.mkdir()
    (git_dir / "notes.txt").write_text("mine")
    fresh = scenarios.get("demo").chain()
    with pytest.raises(ChainCorrupt, match="not a bare git repository"):
        fresh.releases()
    with pytest.raises(ChainCorrupt):
        publish_files("demo", BASE, reason="x")
    assert sorted(p.name for p in git_dir.iterdir()) == ["notes.txt"]


def test_dangling_chain_ref_is_corruption_not_emptiness(chain) -> None:  # type: ignore[no-untyped-def]
    publish_files("demo", BASE, reason="first")
    ref = chain.git_dir / CHAIN_REF
    ref.write_text("f" * 40 + "\n")
    with pytest.raises(ChainCorrupt):
        scenarios.get("demo").chain().releases()


def test_a_lock_left_by_a_killed_publisher_is_named_then_cleared(chain) -> None:  # type: ignore[no-untyped-def]
    import os
    import time

    from reef_cli.core.errors import ChainConflict
    from reef_cli.core.releases import STALE_LOCK_SECONDS

    publish_files("demo", BASE, reason="first")
    lock = chain.git_dir / (CHAIN_REF + ".lock")
    lock.write_text("")
    with pytest.raises(ChainConflict, match="locked by"):
        chain.publish(tree_with(x="1\n"), reason="blocked", retries=1)
    old = time.time() - STALE_LOCK_SECONDS - 1
    os.utime(lock, (old, old))
    assert chain.publish(tree_with(x="2\n"), reason="after", retries=3).number == 2
    assert not lock.exists()


def test_a_tag_lock_left_by_a_killed_publisher_does_not_lose_the_tag(chain) -> None:  # type: ignore[no-untyped-def]
    publish_files("demo", BASE, reason="first")
    tags = chain.git_dir / "refs" / "tags"
    (tags / "r2.lock").write_text("")  # a killed `git update-ref refs/tags/r2` leaves this
    r2 = chain.publish(tree_with(x="1\n"), reason="second")
    assert (tags / "r2").read_text().strip() == r2.commit
    assert not (tags / "r2.lock").exists()


def test_a_release_shows_number_tag_commit_then_its_meta_less_the_number() -> None:
    meta = ReleaseMeta(number=3, source="publish", content_hash="h", created_at="t")
    assert list(Release(3, "c0ffee", meta, tag_prefix="w").to_json().items()) == [
        ("number", 3),
        ("tag", "w3"),
        ("commit", "c0ffee"),
        ("parent", None),
        ("source", "publish"),
        ("recipe", None),
        ("reason", ""),
        ("status", "live"),
        ("points_to", None),
        ("gate", {}),
        ("content_hash", "h"),
        ("created_at", "t"),
    ]

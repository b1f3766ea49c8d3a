"""LoRA sync: a peft adapter directory the engine loads, one adapter served at a time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

from reef_cli.core.errors import EngineError, EngineInconsistent  # noqa: E402
from reefd.engine.client import EngineClient  # noqa: E402
from reefd.sync.lora import LoraSync  # noqa: E402
from tests.fakes.fake_sglang import FakeSGLang  # noqa: E402

CONFIG = {"r": 2, "lora_alpha": 4, "target_modules": ["q_proj", "v_proj"], "lora_dropout": 0.0}


def base_model() -> Any:
    config = transformers.LlamaConfig(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config)


def peft_model() -> Any:
    model = peft.get_peft_model(base_model(), peft.LoraConfig(**CONFIG))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_()  # B starts at zero; make the adapter do something
    return model


@pytest.fixture
def fake(request: pytest.FixtureRequest) -> Iterator[FakeSGLang]:
    with FakeSGLang(**getattr(request, "param", {})) as engine:
        yield engine


def test_push_writes_a_peft_adapter_dir(fake: FakeSGLang, tmp_path: Path) -> None:
    model = peft_model()
    adapter = peft.get_peft_model_state_dict(model)
    sync = LoraSync(EngineClient(fake.url), work_dir=tmp_path / "lora", lora_config=CONFIG)
    stats = sync.push(adapter, "w1")

    directory = tmp_path / "lora" / "w1"
    assert sorted(p.name for p in directory.iterdir()) == [
        "adapter_config.json",
        "adapter_model.safetensors",
    ]
    assert json.loads((directory / "adapter_config.json").read_text())["peft_type"] == "LORA"
    assert fake.calls[0].endpoint == "/load_lora_adapter"
    assert fake.calls[0].body == {"lora_name": "w1", "lora_path": str(directory)}
    assert fake.weight_version == "w1" and set(fake.adapters["w1"][0]) == set(adapter)
    assert stats.mode == "lora"

    # peft itself loads the directory back to the same adapter.
    fresh = peft.PeftModel.from_pretrained(base_model(), str(directory))
    loaded = peft.get_peft_model_state_dict(fresh)
    for name, t in adapter.items():
        assert torch.equal(loaded[name], t), name

    sync.push({k: v * 2 for k, v in adapter.items()}, "w2")
    assert fake.endpoints()[1:] == ["/load_lora_adapter", "/unload_lora_adapter"]
    assert fake.calls[-1].body == {"lora_name": "w1"}
    assert list(fake.adapters) == ["w2"] and not directory.exists()


def test_missing_config_is_an_engine_error(fake: FakeSGLang, tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="lora_config") as caught:
        LoraSync(EngineClient(fake.url), work_dir=tmp_path).push({"x": torch.ones(1)}, "w1")
    assert not isinstance(caught.value, EngineInconsistent)
    assert fake.endpoints() == []


@pytest.mark.parametrize("fake", [{"fail_update_at": 1}], indirect=True)
def test_refused_load_is_inconsistent(fake: FakeSGLang, tmp_path: Path) -> None:
    sync = LoraSync(EngineClient(fake.url), work_dir=tmp_path, lora_config=CONFIG)
    with pytest.raises(EngineInconsistent, match="/load_lora_adapter"):
        sync.push({"x": torch.ones(1)}, "w1")

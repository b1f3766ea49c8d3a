"""The models reefd builds and loads offline, the prompts both ends tokenize alike, and the
checksum the engine reports (LoRA merged)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from reef_cli.core import embedded  # noqa: E402
from reef_cli.core.errors import ConfigError  # noqa: E402
from reefd import models  # noqa: E402


def test_byte_tokenizer_round_trips_any_text_and_knows_chatml() -> None:
    tok = models.byte_tokenizer()
    assert len(tok) == 259
    text = "héllo, wörld ✓ — <b>\n\ttabs"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert ids == list(text.encode())  # id = byte value
    assert tok.decode(ids) == text
    assert [tok.convert_tokens_to_ids(t) for t in (models.IM_START, models.IM_END, models.EOT)] == [
        256,
        257,
        258,
    ]
    assert tok.eos_token == models.IM_END and tok.pad_token == models.EOT


def test_prompt_ids_follow_the_chatml_template() -> None:
    tok = models.byte_tokenizer()
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    ids = models.prompt_ids(tok, messages)
    assert ids[0] == 256 and ids.count(257) == 2
    expected = "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
    assert tok.decode(ids) == expected + "<|im_start|>assistant\n"


def test_messages_of_flattens_an_openai_request() -> None:
    request = {
        "model": "x",
        "messages": [
            {"role": "developer", "content": "rules"},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"function": {"name": "ls", "arguments": "{}"}}],
            },
            {"role": "tool", "content": "out"},
            "junk",
        ],
    }
    assert models.messages_of(request) == [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "a"},  # an image part has no text for a text model
        {"role": "assistant", "content": '{"tool": "ls", "arguments": "{}"}'},
        {"role": "tool", "content": "out"},
    ]
    assert models.messages_of({}) == []


def test_tiny_is_deterministic_per_seed_and_shaped_as_specified() -> None:
    a, b, other = models.load("tiny"), models.load("tiny:0"), models.load("tiny", seed=1)
    assert (a.kind, a.name, b.name) == (models.TINY, "tiny", "tiny:0")
    assert models.state_checksum(a.model) == models.state_checksum(b.model)
    assert models.state_checksum(a.model) != models.state_checksum(other.model)
    assert models.state_checksum(models.load("tiny:1").model) == models.state_checksum(other.model)
    config = a.model.config
    assert (config.hidden_size, config.intermediate_size, config.num_hidden_layers) == (64, 128, 2)
    assert (config.num_attention_heads, config.num_key_value_heads) == (4, 2)
    assert config.vocab_size == len(a.tokenizer) and not config.tie_word_embeddings
    assert not a.model.training
    bf16 = models.load("tiny", dtype="bfloat16")
    assert next(bf16.model.parameters()).dtype == torch.bfloat16


def test_smollm2_sized_config_has_the_real_models_shape() -> None:
    transformers = pytest.importorskip("transformers")
    config = models.smollm2_sized_config()
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    params = sum(p.numel() for p in model.parameters())
    assert 134_000_000 < params < 135_000_000  # SmolLM2-135M: 134.5M
    assert config.tie_word_embeddings and config.vocab_size == 49152


def test_bad_specs_are_config_errors_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as unknown:
        models.load("no-such-model")
    assert "tiny" in (unknown.value.hint or "")
    with pytest.raises(ConfigError):
        models.load("tiny:x")
    with pytest.raises(ConfigError):
        models.load("tiny", dtype="int8")
    with pytest.raises(ConfigError):
        models.load(str(tmp_path))  # a directory with no config.json


def test_checksum_is_over_names_dtypes_shapes_and_bytes() -> None:
    loaded = models.load("tiny")
    state = {k: v.clone() for k, v in loaded.model.state_dict().items()}
    assert models.state_checksum(state) == models.state_checksum(loaded.model)
    state["lm_head.weight"][0, 0] += 1e-3
    assert models.state_checksum(state) != models.state_checksum(loaded.model)
    renamed = {k + "x": v for k, v in loaded.model.state_dict().items()}
    assert models.state_checksum(renamed) != models.state_checksum(loaded.model)
    halved = {k: v.to(torch.bfloat16) for k, v in loaded.model.state_dict().items()}
    assert models.state_checksum(halved) != models.state_checksum(loaded.model)


def test_hf_checkpoint_directories_load(tmp_path: Path) -> None:
    loaded = models.load("tiny:5")
    loaded.model.save_pretrained(tmp_path)
    loaded.tokenizer.save_pretrained(tmp_path)
    again = models.load(str(tmp_path))
    assert again.kind == "hf" and again.name == str(tmp_path.resolve())
    assert models.state_checksum(again.model) == models.state_checksum(loaded.model)
    messages = [{"role": "user", "content": "hi"}]
    assert models.prompt_ids(again.tokenizer, messages) == models.prompt_ids(
        loaded.tokenizer, messages
    )


def test_lora_checksum_merges_the_adapter_without_changing_the_model() -> None:
    peft = pytest.importorskip("peft")
    loaded = models.load("tiny")
    before = models.state_checksum(loaded.model)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    wrapped = peft.get_peft_model(loaded.model, config)
    for name, param in wrapped.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.5)
    served = models.served_state_dict(wrapped)
    assert set(served) == set(models.load("tiny").model.state_dict())  # engine names only
    merged_sum = models.state_checksum(wrapped)
    assert merged_sum != before
    assert models.state_checksum(wrapped.get_base_model()) == merged_sum  # no wrapper needed
    assert models.state_checksum(models.param_map(wrapped)) == before  # untouched base
    merged = wrapped.merge_and_unload()
    assert models.state_checksum(merged) == merged_sum  # bitwise: same addition


@pytest.mark.slow
def test_the_embedded_smollm2_gguf_loads_offline() -> None:
    pytest.importorskip("gguf")
    spec = embedded.spec_named(models.EMBEDDED_NAME)
    if embedded.model_path(spec) is None:
        pytest.skip(f"the embedded model is not installed (reef model install {spec.name})")
    loaded = models.load("smollm2")
    assert loaded.kind == models.SMOLLM2
    assert loaded.model.config.hidden_size == 576 and loaded.model.config.num_hidden_layers == 30
    ids = models.prompt_ids(loaded.tokenizer, [{"role": "user", "content": "What is 2+2?"}])
    assert "<|im_start|>assistant\n" in loaded.tokenizer.decode(ids)
    out = loaded.model.generate(torch.tensor([ids]), max_new_tokens=12, do_sample=False)
    assert "4" in loaded.tokenizer.decode(out[0][len(ids) :], skip_special_tokens=True)

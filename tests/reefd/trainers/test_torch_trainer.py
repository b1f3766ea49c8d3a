"""The built-in trainer on the tiny random-init Llama: both losses against a hand
computation, a step that moves the weights the way the advantage says (ppo) or toward
the targets (nll), exact undo, and served weights in the engine's names with LoRA
merged."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

import torch

from reef_cli.core.errors import ConfigError
from reefd import models
from reefd.trainers import torch_trainer
from reefd.trainers.torch_trainer import TorchTrainer, nll_loss, ppo_loss
from reefd.weight_recipes.base import Sample

# --- the loss, by hand ------------------------------------------------------------------


def test_ppo_loss_matches_a_hand_computation() -> None:
    # six tokens; the last is masked out and holds values that would swamp the sums
    ratios = [1.5, 0.5, 0.5, 1.5, 1.1, 50.0]
    advantages = [1.0, 1.0, -1.0, -1.0, 2.0, 7.0]
    ref_minus_logp = [0.0, math.log(2), -math.log(2), 0.5, -0.5, 9.0]
    logp = [-1.0, -2.0, -0.5, -3.0, -1.2, -0.1]
    old = [lp - math.log(r) for lp, r in zip(logp, ratios, strict=True)]
    ref = [lp + d for lp, d in zip(logp, ref_minus_logp, strict=True)]
    mask = [1, 1, 1, 1, 1, 0]

    # surrogate = min(r*A, clip(r, 0.8, 1.28)*A), token by token:
    #   r=1.5, A=+1: min(1.5, 1.28) = 1.28    (clipped)
    #   r=0.5, A=+1: min(0.5, 0.8)  = 0.5
    #   r=0.5, A=-1: min(-0.5, -0.8) = -0.8   (clipped)
    #   r=1.5, A=-1: min(-1.5, -1.28) = -1.5
    #   r=1.1, A=+2: min(2.2, 2.2) = 2.2      (inside the range: not clipped)
    surrogate_mean = (1.28 + 0.5 - 0.8 - 1.5 + 2.2) / 5  # 0.336
    # k3 = e^d - d - 1 with d = ref - logp:
    #   d=0: 0;  d=ln2: 2 - ln2 - 1;  d=-ln2: 1/2 + ln2 - 1;  d=.5: e^.5 - 1.5;  d=-.5: e^-.5 - .5
    kl_mean = (
        0.0
        + (1 - math.log(2))
        + (math.log(2) - 0.5)
        + (math.exp(0.5) - 1.5)
        + (math.exp(-0.5) - 0.5)
    ) / 5
    expected_loss = -surrogate_mean + 0.02 * kl_mean

    logp_t = torch.tensor(logp, dtype=torch.float64, requires_grad=True)
    loss, kl, clip_fraction = ppo_loss(
        logp_t,
        torch.tensor(old, dtype=torch.float64),
        torch.tensor(ref, dtype=torch.float64),
        torch.tensor(advantages, dtype=torch.float64),
        torch.tensor(mask),
        0.2,
        0.28,
        0.02,
    )
    assert surrogate_mean == pytest.approx(0.336)
    assert kl_mean == pytest.approx(0.1510504, abs=1e-6)
    assert float(loss.detach()) == pytest.approx(expected_loss, abs=1e-12)
    assert float(loss.detach()) == pytest.approx(-0.332979, abs=1e-6)
    assert kl == pytest.approx(kl_mean, abs=1e-12)
    assert clip_fraction == pytest.approx(2 / 5)

    # gradients by hand: d/dlogp of -r*A/n is -r*A/n where the unclipped term is taken,
    # 0 where the clip is; d/dlogp of beta*k3/n is beta*(1 - e^d)/n
    loss.backward()
    assert logp_t.grad is not None
    beta, n = 0.02, 5
    expected_grad = [
        0.0 + beta * (1 - 1) / n,  # clipped; d=0
        -0.5 * 1.0 / n + beta * (1 - 2) / n,  # -0.1 - 0.004
        0.0 + beta * (1 - 0.5) / n,  # clipped
        -1.5 * -1.0 / n + beta * (1 - math.exp(0.5)) / n,
        -1.1 * 2.0 / n + beta * (1 - math.exp(-0.5)) / n,
        0.0,  # masked
    ]
    assert logp_t.grad.tolist() == pytest.approx(expected_grad, abs=1e-12)


def test_ppo_loss_with_nothing_unmasked_is_zero() -> None:
    zeros = torch.zeros(3)
    loss, kl, clip = ppo_loss(zeros, zeros, zeros, torch.ones(3), torch.zeros(3))
    assert (float(loss), kl, clip) == (0.0, 0.0, 0.0)


def test_nll_loss_matches_a_hand_computation() -> None:
    # four tokens; the last is masked out and would swamp the mean
    logp = torch.tensor([-1.0, -2.0, -0.5, -9.0], dtype=torch.float64, requires_grad=True)
    loss = nll_loss(logp, torch.tensor([1, 1, 1, 0]))
    assert float(loss.detach()) == pytest.approx((1.0 + 2.0 + 0.5) / 3, abs=1e-12)
    loss.backward()
    assert logp.grad is not None
    # d/dlogp of -mean(logp): -1/n on every kept token, so a descent step raises each
    assert logp.grad.tolist() == pytest.approx([-1 / 3, -1 / 3, -1 / 3, 0.0], abs=1e-12)
    nothing = nll_loss(torch.zeros(2), torch.zeros(2))
    assert float(nothing) == 0.0


# --- the tiny model ---------------------------------------------------------------------


def _tiny() -> models.Loaded:
    return models.load("tiny", seed=5)


def _sample(loaded: models.Loaded, advantage: float, text: str = "hello there") -> Sample:
    tok = loaded.tokenizer
    prompt = models.prompt_ids(tok, [{"role": "user", "content": "say hello"}])
    response = list(tok(text, add_special_tokens=False)["input_ids"])
    response.append(tok.convert_tokens_to_ids(models.IM_END))
    return Sample("rec_x", prompt, response, advantage)


def _logprob(trainer: TorchTrainer, sample: Sample) -> float:
    """log pi(response | prompt), computed here from the model's logits."""
    ids = torch.tensor([sample.prompt_ids + sample.response_ids])
    with torch.no_grad():
        logits = trainer.model(input_ids=ids).logits[0].float()
    start = len(sample.prompt_ids)
    total = 0.0
    for i, token in enumerate(sample.response_ids):
        total += float(logits[start + i - 1].log_softmax(-1)[token])
    return total


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("mode", ["lora", "full"])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_step_moves_the_logprob_the_way_the_advantage_says(mode: str, sign: float) -> None:
    loaded = _tiny()
    trainer = TorchTrainer(loaded, mode=mode, lr=5e-3, epochs=3)
    sample = _sample(loaded, sign)
    before_weights = trainer.served_weights()
    before = _logprob(trainer, sample)
    metrics = trainer.step([sample])
    after = _logprob(trainer, sample)
    assert not _same(before_weights, trainer.served_weights())
    assert (after - before) * sign > 0.05
    assert metrics.samples == 1
    assert metrics.tokens == len(sample.response_ids)
    assert metrics.kl >= 0.0
    assert 0.0 <= metrics.clip_fraction <= 1.0
    assert metrics.seconds > 0


@pytest.mark.parametrize("mode", ["lora", "full"])
def test_an_nll_step_lowers_the_nll_of_its_targets_whatever_the_advantage(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_ppo(*args: Any) -> Any:
        raise AssertionError("nll takes no PPO term")

    monkeypatch.setattr(torch_trainer, "ppo_loss", no_ppo)
    loaded = _tiny()
    trainer = TorchTrainer(loaded, mode=mode, lr=5e-3, epochs=3)
    # a negative advantage would push a ppo step down; nll imitates the answer regardless
    samples = [_sample(loaded, -1.0), _sample(loaded, 0.0, "another answer")]
    before = [-_logprob(trainer, s) for s in samples]
    metrics = trainer.step(samples, loss="nll")
    after = [-_logprob(trainer, s) for s in samples]
    assert all(a < b - 0.05 for a, b in zip(after, before, strict=True)), (before, after)
    assert metrics.objective == "nll"
    assert (metrics.kl, metrics.clip_fraction) == (0.0, 0.0)  # no reference, no ratio
    assert metrics.tokens == sum(len(s.response_ids) for s in samples)
    # the loss reported is the mean token NLL of the last epoch, before its optimizer step
    assert sum(after) / metrics.tokens < metrics.loss < sum(before) / metrics.tokens


def test_an_unknown_loss_is_a_config_error() -> None:
    trainer = TorchTrainer(_tiny())
    with pytest.raises(ConfigError, match="unknown training loss 'dpo'"):
        trainer.step([_sample(trainer.loaded, 1.0)], loss="dpo")  # type: ignore[arg-type]


def test_the_advantage_reaches_every_response_token(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    real = torch_trainer.ppo_loss

    def spy(logp: Any, old: Any, ref: Any, adv: Any, mask: Any, *rest: Any) -> Any:
        seen.append((adv.detach().clone(), mask.clone()))
        return real(logp, old, ref, adv, mask, *rest)

    monkeypatch.setattr(torch_trainer, "ppo_loss", spy)
    loaded = _tiny()
    trainer = TorchTrainer(loaded)
    a, b = _sample(loaded, 0.75, "one"), _sample(loaded, -0.5, "second answer")
    trainer.step([a, b])
    (adv, mask) = seen[0]
    assert adv.tolist() == [0.75] * len(a.response_ids) + [-0.5] * len(b.response_ids)
    assert bool(mask.all())


def test_a_zero_advantage_batch_leaves_the_weights_as_they_were() -> None:
    trainer = TorchTrainer(_tiny())
    before = trainer.served_weights()
    trainer.step([_sample(trainer.loaded, 0.0)])
    assert _same(before, trainer.served_weights())


def test_pi_old_comes_from_the_sample_when_it_has_logprobs() -> None:
    # old logprobs 1 nat below the policy's: every ratio is e > 1.28, so with A > 0 every
    # token is clipped and (the reference being the policy) nothing moves
    trainer = TorchTrainer(_tiny())
    sample = _sample(trainer.loaded, 1.0)
    seq = trainer._seq(sample)
    assert seq is not None
    with torch.no_grad():
        current = trainer._logprobs([seq])[0].tolist()
    sample.old_logprobs = [v - 1.0 for v in current]
    before = trainer.served_weights()
    metrics = trainer.step([sample])
    assert metrics.clip_fraction == 1.0
    assert _same(before, trainer.served_weights())


def test_given_old_logprobs_equal_to_the_recomputed_ones_train_the_same() -> None:
    recomputing, given = TorchTrainer(_tiny(), epochs=2), TorchTrainer(_tiny(), epochs=2)
    sample = _sample(recomputing.loaded, 1.0)
    seq = given._seq(sample)
    assert seq is not None
    with torch.no_grad():
        old = given._logprobs([seq])[0].tolist()
    recomputing.step([sample])
    given.step([Sample(sample.record_id, sample.prompt_ids, sample.response_ids, 1.0, old)])
    assert _same(recomputing.served_weights(), given.served_weights())


def test_old_logprobs_of_the_wrong_length_are_recomputed() -> None:
    trainer = TorchTrainer(_tiny())
    sample = _sample(trainer.loaded, 1.0)
    sample.old_logprobs = [-1.0]
    seq = trainer._seq(sample)
    assert seq is not None and seq.old is None


def test_snapshot_and_restore_undo_a_step_exactly() -> None:
    trainer = TorchTrainer(_tiny(), lr=1e-2)
    sample = _sample(trainer.loaded, 1.0)
    trainer.step([sample])  # the optimizer has state now
    original = trainer.served_weights()
    snap = trainer.snapshot()
    trainer.step([sample])
    stepped = trainer.served_weights()
    assert not _same(original, stepped)
    trainer.restore(snap)
    assert _same(original, trainer.served_weights())
    trainer.step([sample])  # the optimizer's moments came back too: the same step again
    assert _same(stepped, trainer.served_weights())
    trainer.restore(snap)  # a snapshot restores more than once
    assert _same(original, trainer.served_weights())


def test_served_weights_are_the_engine_names_with_lora_merged() -> None:
    base = _tiny().model.state_dict()
    trainer = TorchTrainer(_tiny(), lr=1e-2)
    served = trainer.served_weights()
    assert list(served) == list(base)
    assert _same(served, base)  # LoRA's B starts at zero: nothing merged yet
    trainer.step([_sample(trainer.loaded, 1.0)])
    served = trainer.served_weights()
    assert list(served) == list(base)
    changed = {k for k in served if not torch.equal(served[k], base[k])}
    assert "model.layers.0.self_attn.q_proj.weight" in changed
    assert "model.embed_tokens.weight" not in changed and "lm_head.weight" not in changed
    # merged = W + (B @ A) * alpha / r, by hand for one layer
    q = trainer.model.get_base_model().model.layers[0].self_attn.q_proj
    a, b = q.lora_A["default"].weight, q.lora_B["default"].weight
    expected = base["model.layers.0.self_attn.q_proj.weight"] + (b @ a) * (16 / 8)
    assert torch.allclose(served["model.layers.0.self_attn.q_proj.weight"], expected, atol=1e-7)
    assert all(t.device.type == "cpu" and not t.requires_grad for t in served.values())
    assert models.state_checksum(served) == models.state_checksum(trainer.model)


def test_adapter_is_what_peft_saves() -> None:
    trainer = TorchTrainer(_tiny(), lora_r=4, lora_alpha=8)
    tensors, config = trainer.adapter()
    assert tensors and all(k.startswith("base_model.model.") for k in tensors)
    assert any(".lora_A." in k for k in tensors) and any(".lora_B." in k for k in tensors)
    assert not any(".default." in k for k in tensors)
    json.dumps(config)  # plain JSON, for adapter_config.json
    assert config["r"] == 4 and config["lora_alpha"] == 8
    assert config["peft_type"] == "LORA"
    assert set(config["target_modules"]) == {
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    }
    with pytest.raises(ConfigError):
        TorchTrainer(_tiny(), mode="full").adapter()


def test_load_weights_takes_on_a_release() -> None:
    source = TorchTrainer(_tiny(), lr=1e-2)
    source.step([_sample(source.loaded, 1.0)])
    adapter, _ = source.adapter()

    lora = TorchTrainer(_tiny())
    lora.load_weights(adapter, kind="lora")
    assert _same(lora.served_weights(), source.served_weights())

    full = TorchTrainer(_tiny(), mode="full")
    full.load_weights(source.served_weights(), kind="full")
    assert _same(full.served_weights(), source.served_weights())

    rebased = TorchTrainer(_tiny())  # LoRA mode: full weights become the base, adapter zero
    rebased.load_weights(source.served_weights(), kind="full")
    assert _same(rebased.served_weights(), source.served_weights())

    with pytest.raises(ConfigError):
        full.load_weights(adapter, kind="lora")
    with pytest.raises(ConfigError):
        lora.load_weights({"model.norm.weight": torch.zeros(64)}, kind="full")


def test_generate_is_greedy_text() -> None:
    trainer = TorchTrainer(_tiny())
    messages = [{"role": "user", "content": "hi"}]
    first = trainer.generate(messages, max_tokens=6)
    assert isinstance(first, str)
    assert trainer.generate(messages, max_tokens=6) == first


def test_unknown_mode_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        TorchTrainer(_tiny(), mode="qlora")

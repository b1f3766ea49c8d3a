"""reefd's built-in trainer: one device (CPU or CUDA), peft LoRA or a full fine-tune.

One ``step`` trains on a batch with the loss its recipe names (``Batch.loss``):

- ``ppo`` (OpenClaw-RL's and SAO's): per response token the ratio to π_old (the engine's
  logprobs when the sample has them, else recomputed here before the update, as Slime
  does by default), a two-sided clipped surrogate (0.2 / 0.28) weighted by the advantage,
  and a k3 KL estimate to the reference (the base weights: the adapter switched off in
  LoRA mode, the weights at construction in full mode);
- ``nll`` (SFT's): the mean negative log-likelihood of the response tokens. The samples
  are answers to imitate, so neither the advantage, π_old nor the reference takes part.

Both are pure functions (``ppo_loss``, ``nll_loss``) so their arithmetic can be checked
by hand.

The trainer owns ``loaded.model``: LoRA layers are put into it in place. The engine must
serve its own copy (the same spec and seed build the same weights).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reef_cli.core.errors import ConfigError
from reefd._torch import require
from reefd.models import Loaded, param_map, prompt_ids, served_state_dict
from reefd.weight_recipes.base import LOSSES, Loss, Sample

MODES = ("lora", "full")
ADAPTER = "default"


@dataclass
class StepMetrics:
    loss: float
    kl: float
    clip_fraction: float
    tokens: int
    samples: int
    seconds: float
    objective: Loss = "ppo"  # the loss trained on (``kl`` and ``clip_fraction`` are ppo's)


def ppo_loss(
    logp: Any,
    old_logp: Any,
    ref_logp: Any,
    adv: Any,
    mask: Any,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    kl_beta: float = 0.02,
) -> tuple[Any, float, float]:
    """``(loss, mean kl, clip fraction)`` over the tokens where ``mask`` is set.

    ratio = exp(logp - old); surrogate = min(ratio*A, clip(ratio, 1-low, 1+high)*A);
    kl = exp(ref - logp) - (ref - logp) - 1 (k3: unbiased, never negative);
    loss = -mean(surrogate) + kl_beta * mean(kl). A token counts as clipped when the
    clipped term is the one taken (it is strictly smaller)."""
    torch = require("torch")
    keep = mask.to(torch.bool)
    count = keep.sum().clamp(min=1).to(logp.dtype)
    zero = torch.zeros_like(logp)
    ratio = torch.exp(torch.where(keep, logp - old_logp, zero))
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * adv
    surrogate = torch.where(keep, torch.minimum(unclipped, clipped), zero)
    log_ref = torch.where(keep, ref_logp - logp, zero)
    kl = torch.where(keep, torch.exp(log_ref) - log_ref - 1.0, zero)
    loss = -surrogate.sum() / count + kl_beta * kl.sum() / count
    kl_mean = float((kl.sum() / count).detach())
    clip_fraction = float(((clipped < unclipped) & keep).sum().to(logp.dtype) / count)
    return loss, kl_mean, clip_fraction


def nll_loss(logp: Any, mask: Any) -> Any:
    """The mean negative log-likelihood of the tokens where ``mask`` is set: supervised
    fine-tuning's loss. Its gradient raises every target token's log-probability."""
    torch = require("torch")
    keep = mask.to(torch.bool)
    count = keep.sum().clamp(min=1).to(logp.dtype)
    return -torch.where(keep, logp, torch.zeros_like(logp)).sum() / count


@dataclass
class _Seq:
    """One sample ready for the model: ``ids`` = prompt + response, the response starting
    at ``start`` (``length`` tokens)."""

    ids: list[int]
    start: int
    length: int
    advantage: float
    old: list[float] | None


# one micro-batch's (loss, mean kl, clip fraction), given its index, its sequences and
# their response-token logprobs under the policy being trained
GroupLoss = Callable[[int, list[_Seq], Any], tuple[Any, float, float]]


class TorchTrainer:
    def __init__(
        self,
        loaded: Loaded,
        *,
        mode: str = "lora",
        lr: float = 1e-4,
        lora_r: int = 8,
        lora_alpha: int = 16,
        clip_low: float = 0.2,
        clip_high: float = 0.28,
        kl_beta: float = 0.02,
        epochs: int = 1,
        seed: int = 0,
        max_grad_norm: float = 1.0,
        micro_batch_tokens: int = 2048,
        max_length: int | None = None,
    ) -> None:
        if mode not in MODES:
            raise ConfigError(f"unknown trainer mode {mode!r}", "trainer.mode is lora or full")
        self.torch = torch = require("torch")
        self.loaded = loaded
        self.tokenizer = loaded.tokenizer
        self.mode = mode
        self.lr = lr
        self.clip_low, self.clip_high, self.kl_beta = clip_low, clip_high, kl_beta
        self.epochs = max(1, int(epochs))
        self.seed = seed
        self.max_grad_norm = max_grad_norm
        self.micro_batch_tokens = max(1, micro_batch_tokens)
        base = loaded.model
        config = getattr(base, "config", None)
        self.max_length = max_length or int(getattr(config, "max_position_embeddings", 2048))
        self.device = next(base.parameters()).device
        self.engine_names = list(base.state_dict().keys())
        self.lora_config: dict[str, Any] | None = None
        self.reference: Any = None
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            if mode == "lora":
                self.model = self._wrap_lora(base, lora_r, lora_alpha)
            else:
                self.model = base.requires_grad_(True)
                self.reference = copy.deepcopy(base).eval()
                for p in self.reference.parameters():
                    p.requires_grad_(False)
        self.model.eval()  # no dropout: old, new and reference logprobs must agree
        self.optimizer = self._optimizer()

    # ------------------------------------------------------------------ setup

    def _wrap_lora(self, base: Any, r: int, alpha: int) -> Any:
        peft = require("peft")
        nn = self.torch.nn
        targets = sorted(
            {
                name.rsplit(".", 1)[-1]
                for name, module in base.named_modules()
                if isinstance(module, nn.Linear) and name.rsplit(".", 1)[-1] != "lm_head"
            }
        )
        config = peft.LoraConfig(
            r=r,
            lora_alpha=alpha,
            target_modules=targets,
            lora_dropout=0.0,
            bias="none",
            task_type="CAUSAL_LM",
        )
        model = peft.get_peft_model(base, config)
        data = model.peft_config[ADAPTER].to_dict()
        for key, value in data.items():
            if isinstance(value, set):
                data[key] = sorted(value)
        data["base_model_name_or_path"] = self.loaded.name
        self.lora_config = _jsonable(data)
        return model

    def _trainable(self) -> list[tuple[str, Any]]:
        return [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]

    def _optimizer(self) -> Any:
        # no weight decay: a zero-advantage batch leaves the weights as they were
        params = [p for _, p in self._trainable()]
        return self.torch.optim.AdamW(params, lr=self.lr, weight_decay=0.0)

    # ------------------------------------------------------------------ training

    def step(self, samples: Sequence[Sample], loss: Loss = "ppo") -> StepMetrics:
        """One update on ``samples`` (``epochs`` optimizer steps over the whole batch) with
        ``loss``: ``ppo`` or ``nll`` (the module docstring)."""
        if loss not in LOSSES:
            raise ConfigError(f"unknown training loss {loss!r}", f"one of: {', '.join(LOSSES)}")
        torch = self.torch
        started = time.perf_counter()
        seqs = [s for s in (self._seq(sample) for sample in samples) if s is not None]
        tokens = sum(s.length for s in seqs)
        if not seqs:
            return StepMetrics(0.0, 0.0, 0.0, 0, 0, time.perf_counter() - started, loss)
        groups = self._micro_batches(seqs)
        group_loss = self._ppo(groups) if loss == "ppo" else self._nll
        loss_total = kl_total = clip_total = 0.0
        for _ in range(self.epochs):
            self.optimizer.zero_grad(set_to_none=True)
            loss_total = kl_total = clip_total = 0.0
            for index, group in enumerate(groups):
                logp = torch.cat(self._logprobs(group))
                value, kl, clip = group_loss(index, group, logp)
                share = logp.numel() / tokens  # token-level mean over the whole batch
                (value * share).backward()
                loss_total += float(value.detach()) * share
                kl_total += kl * share
                clip_total += clip * share
            if self.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(
                    [p for _, p in self._trainable()], self.max_grad_norm
                )
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return StepMetrics(
            loss=loss_total,
            kl=kl_total,
            clip_fraction=clip_total,
            tokens=tokens,
            samples=len(seqs),
            seconds=time.perf_counter() - started,
            objective=loss,
        )

    def _ppo(self, groups: list[list[_Seq]]) -> GroupLoss:
        """PPO's loss for each micro-batch, with the reference's logprobs and π_old taken
        once, before the update."""
        torch = self.torch
        with torch.no_grad():
            ref = [self._logprobs(group, reference=True) for group in groups]
            old = [
                self._old(group, self._logprobs(group) if _needs_old(group) else None)
                for group in groups
            ]

        def group_loss(index: int, group: list[_Seq], logp: Any) -> tuple[Any, float, float]:
            adv = torch.cat(
                [
                    torch.full((s.length,), s.advantage, dtype=logp.dtype, device=self.device)
                    for s in group
                ]
            )
            return ppo_loss(
                logp,
                torch.cat(old[index]).to(logp.dtype),
                torch.cat(ref[index]).to(logp.dtype),
                adv,
                torch.ones_like(logp, dtype=torch.bool),
                self.clip_low,
                self.clip_high,
                self.kl_beta,
            )

        return group_loss

    def _nll(self, index: int, group: list[_Seq], logp: Any) -> tuple[Any, float, float]:
        """SFT's loss for a micro-batch: no reference, no π_old, so no KL and no clip."""
        return nll_loss(logp, self.torch.ones_like(logp, dtype=self.torch.bool)), 0.0, 0.0

    def _seq(self, sample: Sample) -> _Seq | None:
        """Cut ``sample`` to ``max_length`` (the prompt loses its oldest tokens first, the
        response its tail); engine logprobs no longer fit a cut prompt and are dropped."""
        prompt, response = list(sample.prompt_ids), list(sample.response_ids)
        if not response or not prompt:
            return None  # nothing to predict, or no position to predict the first token from
        old = sample.old_logprobs
        if old is not None and len(old) != len(response):
            old = None
        room = self.max_length
        if len(response) > room - 1:
            response = response[: room - 1]
            old = old[: room - 1] if old is not None else None
        if len(prompt) + len(response) > room:
            prompt = prompt[len(prompt) + len(response) - room :]
            old = None
        return _Seq(prompt + response, len(prompt), len(response), float(sample.advantage), old)

    def _micro_batches(self, seqs: list[_Seq]) -> list[list[_Seq]]:
        groups: list[list[_Seq]] = []
        current: list[_Seq] = []
        longest = 0
        for seq in seqs:
            width = max(longest, len(seq.ids))
            if current and width * (len(current) + 1) > self.micro_batch_tokens:
                groups.append(current)
                current, width = [], len(seq.ids)
            current.append(seq)
            longest = width
        if current:
            groups.append(current)
        return groups

    def _logprobs(self, group: list[_Seq], *, reference: bool = False) -> list[Any]:
        """Each sequence's response-token logprobs under the policy (or the reference)."""
        torch = self.torch
        width = max(len(s.ids) for s in group)
        pad = self._pad_id()
        ids = torch.full((len(group), width), pad, dtype=torch.long, device=self.device)
        attention = torch.zeros((len(group), width), dtype=torch.long, device=self.device)
        for row, seq in enumerate(group):
            ids[row, : len(seq.ids)] = torch.tensor(seq.ids, dtype=torch.long)
            attention[row, : len(seq.ids)] = 1
        if reference and self.mode == "lora":
            with self.model.disable_adapter():
                logits = self.model(input_ids=ids, attention_mask=attention).logits
        elif reference:
            logits = self.reference(input_ids=ids, attention_mask=attention).logits
        else:
            logits = self.model(input_ids=ids, attention_mask=attention).logits
        out = []
        for row, seq in enumerate(group):
            span = logits[row, seq.start - 1 : seq.start - 1 + seq.length].float()
            targets = ids[row, seq.start : seq.start + seq.length]
            out.append(span.log_softmax(-1).gather(-1, targets[:, None]).squeeze(-1))
        return out

    def _old(self, group: list[_Seq], recomputed: list[Any] | None) -> list[Any]:
        torch = self.torch
        out = []
        for i, seq in enumerate(group):
            if seq.old is not None:
                out.append(torch.tensor(seq.old, dtype=torch.float32, device=self.device))
            else:
                assert recomputed is not None
                out.append(recomputed[i].detach())
        return out

    def _pad_id(self) -> int:
        for value in (
            getattr(self.tokenizer, "pad_token_id", None),
            getattr(self.tokenizer, "eos_token_id", None),
        ):
            if isinstance(value, int):
                return value
        return 0

    # ------------------------------------------------------------------ weights

    def served_weights(self) -> dict[str, Any]:
        """The weights the engine should serve, by engine name (LoRA merged), as detached
        CPU copies: what a weight sync pushes and a full release stores. The copies are
        packed (``buckets.pack``: one buffer per dtype, in name order), so a ``dist``
        push broadcasts each bucket straight from them."""
        from reefd.sync.buckets import pack

        with self.torch.no_grad():
            if self.mode == "lora":
                state = served_state_dict(self.model)
            else:
                state = self.model.state_dict()
            return pack({name: state[name].detach().to("cpu") for name in self.engine_names})

    def adapter(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The LoRA adapter as peft saves it: ``(state dict with peft names, config)``."""
        if self.mode != "lora" or self.lora_config is None:
            raise ConfigError("the full fine-tune trainer has no adapter", "set trainer.mode: lora")
        peft = require("peft")
        with self.torch.no_grad():
            state = peft.get_peft_model_state_dict(self.model, adapter_name=ADAPTER)
            tensors = {k: v.detach().to("cpu").clone() for k, v in state.items()}
        return tensors, copy.deepcopy(self.lora_config)

    def load_weights(self, tensors: Mapping[str, Any], *, kind: str = "full") -> None:
        """Take on the weights of a release: ``full`` = served weights by engine name (LoRA
        mode: they become the base and the adapter starts from zero again), ``lora`` = an
        adapter by peft name. The optimizer starts afresh."""
        torch = self.torch
        with torch.no_grad():
            if kind == "lora":
                if self.mode != "lora":
                    raise ConfigError(
                        "a LoRA release cannot load into the full fine-tune trainer",
                        "set trainer.mode: lora, or roll back to a full release",
                    )
                peft = require("peft")
                self._zero_adapter()
                result = peft.set_peft_model_state_dict(
                    self.model, dict(tensors), adapter_name=ADAPTER
                )
                unexpected = list(getattr(result, "unexpected_keys", []) or [])
                if unexpected:
                    raise ConfigError(
                        f"the adapter does not fit this model ({unexpected[0]!r})",
                        "load a release trained from the same base model",
                    )
            elif kind == "full":
                live = param_map(self.model)
                missing = [name for name in live if name not in tensors]
                if missing:
                    raise ConfigError(
                        f"the weights lack {missing[0]!r}",
                        "load a release of the same base model",
                    )
                for name, target in live.items():
                    source = tensors[name]
                    if tuple(source.shape) != tuple(target.shape):
                        raise ConfigError(
                            f"{name}: shape {tuple(source.shape)} is not {tuple(target.shape)}",
                            "load a release of the same base model",
                        )
                    target.copy_(source.to(device=target.device, dtype=target.dtype))
                if self.mode == "lora":
                    self._zero_adapter()
            else:
                raise ConfigError(f"unknown release kind {kind!r}", "full or lora")
        self.optimizer = self._optimizer()

    def _zero_adapter(self) -> None:
        """LoRA B = 0: the adapter adds nothing, so the model serves its base weights."""
        for name, param in self.model.named_parameters():
            if ".lora_B." in name:
                param.zero_()

    # ------------------------------------------------------------------ undo

    def snapshot(self) -> dict[str, Any]:
        """The trainable state (parameters and optimizer): ``restore`` undoes a step."""
        with self.torch.no_grad():
            params = {n: p.detach().clone() for n, p in self._trainable()}
        return {"params": params, "optimizer": copy.deepcopy(self.optimizer.state_dict())}

    def restore(self, snap: Mapping[str, Any]) -> None:
        with self.torch.no_grad():
            for name, param in self._trainable():
                param.copy_(snap["params"][name])
        self.optimizer.load_state_dict(copy.deepcopy(snap["optimizer"]))

    # ------------------------------------------------------------------ the gate's answers

    def generate(self, messages: list[dict[str, str]], max_tokens: int = 64) -> str:
        """Greedy answer of the current weights (the gate compares it with the served ones)."""
        torch = self.torch
        transformers = require("transformers")
        ids = prompt_ids(self.tokenizer, messages)
        if len(ids) + max_tokens > self.max_length:
            ids = ids[-max(1, self.max_length - max_tokens) :]
        eos = [
            t
            for t in {getattr(self.tokenizer, "eos_token_id", None), self._im_end()}
            if isinstance(t, int)
        ]
        config = transformers.GenerationConfig(
            max_new_tokens=max_tokens,
            do_sample=False,
            eos_token_id=eos or None,
            pad_token_id=self._pad_id(),
        )
        inputs = torch.tensor([ids], dtype=torch.long, device=self.device)
        with torch.no_grad():
            out = self.model.generate(
                input_ids=inputs,
                attention_mask=torch.ones_like(inputs),
                generation_config=config,
            )
        return str(self.tokenizer.decode(out[0, len(ids) :].tolist(), skip_special_tokens=True))

    def _im_end(self) -> int | None:
        token_id = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        unk = getattr(self.tokenizer, "unk_token_id", None)
        return token_id if isinstance(token_id, int) and token_id != unk else None


def _needs_old(group: list[_Seq]) -> bool:
    return any(seq.old is None for seq in group)


def _jsonable(value: Any) -> Any:
    """peft's config as plain JSON (enums as their values, sets as sorted lists)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_jsonable(v) for v in value]
        return sorted(items, key=str) if isinstance(value, set | frozenset) else items
    if value is None or isinstance(value, bool | int | float | str):
        return value
    enum_value = getattr(value, "value", None)
    if isinstance(enum_value, str | int):
        return enum_value
    return str(value)

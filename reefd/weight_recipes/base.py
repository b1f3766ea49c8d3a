"""What a weight recipe gives the trainer: samples with an advantage, and what it used.

A recipe reads records (and reports) from the store, keeps those that may train the
current weights (``eligibility.eligible``), gives each an advantage and returns a
``Batch``. The batch names its loss: ``ppo`` (a policy-gradient step weighted by the
advantage: SAO, OpenClaw-RL) or ``nll`` (supervised: raise the log-probability of the
response tokens, whatever the advantage: SFT). The daemon trains on ``samples`` and,
once the batch is spent (trained on, or looked at by the gate and rejected), adds
``consumed`` to the record ids it never offers the recipe again; ``dropped`` (also in
``consumed``) are records that can never train (stale, spanned a swap, failed) and may
be consumed even while waiting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from reef_cli.core.store import Store
from reefd.weight_recipes.eligibility import Counts

Loss = Literal["ppo", "nll"]
LOSSES: tuple[Loss, ...] = ("ppo", "nll")


@dataclass
class Sample:
    """One trainable response: token ids and the advantage on every response token."""

    record_id: str
    prompt_ids: list[int]
    response_ids: list[int]
    advantage: float
    old_logprobs: list[float] | None = None  # the engine's, when its token ids are used


@dataclass
class Batch:
    samples: list[Sample]
    counts: Counts
    consumed: list[str]  # record ids spent once this batch is (samples' and dropped ones)
    dropped: list[str] = field(default_factory=list)  # never trainable: consume at any time
    loss: Loss = "ppo"  # how the trainer learns from the samples (``TorchTrainer.step``)


class WeightRecipe(Protocol):
    name: str
    state: dict[str, Any]  # JSON the daemon persists and hands back (``state.update``)

    def batch(
        self, store: Store, scenario: str, current_version: str, consumed: set[str]
    ) -> Batch: ...

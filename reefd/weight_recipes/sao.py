"""SAO: train on records that reports scored, one scored rollout at a time.

A record referenced by a report with a score is one unit: no group, no barrier. Its
advantage is the score minus a running baseline (an exponential moving average of the
scores seen, in place of SAO's critic) on every response token, and the trainer's
two-sided clipped ratio bounds the update. The baseline lives in ``state`` (the daemon
persists it): a batch's new baseline is held as ``pending`` and taken on only once the
daemon has consumed that batch, so a batch built again (the gate could not judge it)
does not count its scores twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reef_cli.core.store import Store
from reefd.weight_recipes.base import Batch, Sample
from reefd.weight_recipes.samples import tokens_of
from reefd.weight_recipes.scores import candidates


def sao_advantages(
    scores: Sequence[float], baseline: float | None, decay: float
) -> tuple[list[float], float]:
    """``(score - baseline for each, the baseline after them)``.

    Every score of a batch is measured against the baseline before the batch (they train
    the same weights); the baseline then moves toward each score in turn:
    ``b = decay * b + (1 - decay) * s``. With no baseline yet, the batch's mean starts it."""
    if not scores:
        return [], 0.0 if baseline is None else baseline
    start = sum(scores) / len(scores) if baseline is None else baseline
    advantages = [s - start for s in scores]
    after = start
    for s in scores:
        after = decay * after + (1.0 - decay) * s
    return advantages, after


class SAO:
    name = "sao"

    def __init__(
        self,
        batch_size: int = 8,
        max_staleness: int = 2,
        baseline_decay: float = 0.9,
        *,
        tokenizer: Any = None,
        rollout_logprobs: bool = True,
    ) -> None:
        self.batch_size = batch_size
        self.max_staleness = max_staleness
        self.baseline_decay = baseline_decay
        self.tokenizer = tokenizer
        self.rollout_logprobs = rollout_logprobs
        self.state: dict[str, Any] = {"baseline": None, "pending": None}

    def _settle(self, consumed: set[str]) -> None:
        """Take on the last batch's baseline if the daemon consumed that batch."""
        pending = self.state.get("pending")
        if isinstance(pending, dict):
            ids = pending.get("ids") or []
            if ids and all(i in consumed for i in ids):
                self.state["baseline"] = pending.get("baseline")
        self.state["pending"] = None

    def batch(self, store: Store, scenario: str, current_version: str, consumed: set[str]) -> Batch:
        self._settle(consumed)
        found = candidates(store, scenario, current_version, consumed, self.max_staleness)
        scores, counts, dropped = found.scores, found.counts, found.dropped
        samples: list[Sample] = []
        unit_scores: list[float] = []
        for record in found.records:
            if record.id not in scores:
                counts.unscored += 1
                continue
            if len(samples) >= self.batch_size:
                continue  # scored and eligible: the next batch takes it
            tokens = tokens_of(record, self.tokenizer, logprobs=self.rollout_logprobs)
            if tokens is None:
                counts.failed += 1
                dropped.append(record.id)
                continue
            samples.append(
                Sample(record.id, tokens.prompt_ids, tokens.response_ids, 0.0, tokens.old_logprobs)
            )
            unit_scores.append(scores[record.id])
        baseline = self.state.get("baseline")
        advantages, after = sao_advantages(
            unit_scores,
            baseline if isinstance(baseline, int | float) else None,
            self.baseline_decay,
        )
        for sample, advantage in zip(samples, advantages, strict=True):
            sample.advantage = advantage
        counts.used = len(samples)
        if samples:
            self.state["pending"] = {"ids": [s.record_id for s in samples], "baseline": after}
        return Batch(samples, counts, [s.record_id for s in samples] + dropped, dropped)

"""SFT: answers that reports accepted become supervised examples.

A record whose latest scored report reaches ``threshold`` (default 1.0: in Reef's
convention a report scores 1 for an answer that did the job and 0 for one that did not)
is one example: its prompt is the context, its response tokens are the targets, and the
trainer lowers their negative log-likelihood (``Batch.loss = "nll"``) instead of taking
PPO's clipped step. An accepted answer is worth imitating as it is, so there is no
advantage, no baseline and no π_old.

Which records may train: whole and answered 200 (``scores.candidates``). An accepted
answer is worth imitating whichever weights wrote it — reefd's, older ones, or a hosted
model behind a plain `reef serve` — so by default there is no staleness rule
(``max_staleness=None``); set one to train only on what recent weights wrote. A scored
record under the threshold is counted (``below_threshold``) and left unconsumed, like an
unscored one: a later report may accept it.

A simulated user (a persona, docs/personas.md) reports 1 for a session it accepted and 0
otherwise, so its accepted sessions through reefd's proxy are records that pass the
default threshold: they need no second source.
"""

from __future__ import annotations

import math
from typing import Any

from reef_cli.core.errors import ConfigError
from reef_cli.core.store import Store
from reefd.weight_recipes.base import Batch, Sample
from reefd.weight_recipes.samples import tokens_of
from reefd.weight_recipes.scores import candidates

DEFAULT_THRESHOLD = 1.0


def check_threshold(threshold: float) -> float:
    """``threshold`` if it can accept an answer: a finite score above 0, at most 1 (the
    scale Reef's reports, the console and `reef eval` use). 0 would take answers that
    were refused."""
    value = float(threshold)
    if not math.isfinite(value) or not 0.0 < value <= 1.0:
        raise ConfigError(
            f"sft's threshold {threshold!r} is out of range",
            "set recipe.threshold to a score above 0 and at most 1 (1: fully accepted)",
        )
    return value


class SFT:
    name = "sft"

    def __init__(
        self,
        batch_size: int = 8,
        max_staleness: int | None = None,
        threshold: float = DEFAULT_THRESHOLD,
        *,
        tokenizer: Any = None,
    ) -> None:
        self.batch_size = batch_size
        self.max_staleness = max_staleness
        self.threshold = check_threshold(threshold)
        self.tokenizer = tokenizer
        self.state: dict[str, Any] = {}  # nothing carries over between batches

    def batch(self, store: Store, scenario: str, current_version: str, consumed: set[str]) -> Batch:
        """Up to ``batch_size`` accepted records, oldest first, as supervised samples."""
        found = candidates(store, scenario, current_version, consumed, self.max_staleness)
        counts, dropped = found.counts, found.dropped
        samples: list[Sample] = []
        for record in found.records:
            score = found.scores.get(record.id)
            if score is None:
                counts.unscored += 1
                continue
            if score < self.threshold:
                counts.below_threshold += 1
                continue
            if len(samples) >= self.batch_size:
                continue  # accepted and eligible: the next batch takes it
            tokens = tokens_of(record, self.tokenizer, logprobs=False)
            if tokens is None:  # no chat request or no answer text: nothing to imitate
                counts.failed += 1
                dropped.append(record.id)
                continue
            samples.append(Sample(record.id, tokens.prompt_ids, tokens.response_ids, 1.0))
        counts.used = len(samples)
        consumed_now = [s.record_id for s in samples] + dropped
        return Batch(samples, counts, consumed_now, dropped, loss="nll")

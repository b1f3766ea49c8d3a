"""Paired evaluation: does the candidate beat the incumbent on the same tasks?

Both trees run every task ``k`` times; a task's score is the mean of its repeats. The
decision looks at per-task differences, so task difficulty cancels out:

- any missing score (the evaluator or the model failed) makes the run **invalid** — an
  outage is never a win;
- a protected task where the candidate scores lower than the incumbent **vetoes**;
- otherwise a one-sided **sign test** (default) or a **bootstrap** confidence interval on
  the mean difference must show an improvement of at least ``min_effect``.

Ties and losses are not published. Every number behind the verdict goes into the check's
``numbers`` so ``reef harness show`` can print them.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from reef_cli.core.gate import Check


@dataclass(frozen=True)
class Policy:
    method: Literal["sign", "bootstrap"] = "sign"
    alpha: float = 0.05
    min_effect: float = 0.0
    protected: frozenset[str] = frozenset()
    protected_tolerance: float = 0.0
    bootstrap_samples: int = 2000
    seed: int = 0


@dataclass
class Outcome:
    status: Literal["passed", "failed", "invalid"]
    reason: str
    numbers: dict[str, Any] = field(default_factory=dict)

    def as_check(self) -> Check:
        check = Check("evaluation", self.status, self.reason)
        check.findings = [f"{k}={v}" for k, v in self.numbers.items() if not isinstance(v, dict)]
        return check

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "numbers": self.numbers}


Scores = Mapping[str, Sequence[float | None]]  # task id -> one score per repeat


def sign_test_p(wins: int, losses: int) -> float:
    """One-sided exact binomial p-value of at least ``wins`` successes in ``wins+losses``."""
    n = wins + losses
    if n == 0:
        return 1.0
    return sum(math.comb(n, k) for k in range(wins, n + 1)) / 2**n


def bootstrap_lower(diffs: Sequence[float], alpha: float, samples: int, seed: int) -> float:
    """Lower bound of the one-sided (1 - alpha) bootstrap interval of the mean difference."""
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(statistics.fmean(rng.choices(diffs, k=n)) for _ in range(samples))
    return means[max(0, math.floor(alpha * samples) - 1)]


def decide(candidate: Scores, incumbent: Scores, policy: Policy = Policy()) -> Outcome:
    tasks = sorted(set(candidate) | set(incumbent))
    if not tasks:
        return Outcome("invalid", "no evaluation tasks ran")
    missing = [
        t
        for t in tasks
        if t not in candidate
        or t not in incumbent
        or not candidate[t]
        or not incumbent[t]
        or any(s is None or not math.isfinite(s) for s in [*candidate[t], *incumbent[t]])
    ]
    if missing:
        return Outcome(
            "invalid",
            f"{len(missing)} task(s) have no valid score (evaluator or model failure): "
            f"{', '.join(missing[:5])}",
            {"failed_tasks": missing},
        )
    cand = {t: statistics.fmean(float(s) for s in candidate[t] if s is not None) for t in tasks}
    inc = {t: statistics.fmean(float(s) for s in incumbent[t] if s is not None) for t in tasks}
    diffs = {t: cand[t] - inc[t] for t in tasks}
    numbers: dict[str, Any] = {
        "tasks": len(tasks),
        "repeats": min(len(candidate[t]) for t in tasks),
        "candidate_mean": round(statistics.fmean(cand.values()), 4),
        "incumbent_mean": round(statistics.fmean(inc.values()), 4),
        "mean_diff": round(statistics.fmean(diffs.values()), 4),
        "per_task": {t: round(d, 4) for t, d in diffs.items()},
    }
    regressed = [
        t for t in tasks if t in policy.protected and diffs[t] < -policy.protected_tolerance
    ]
    if regressed:
        return Outcome(
            "failed", f"protected task(s) regressed: {', '.join(regressed)} (veto)", numbers
        )
    values = list(diffs.values())
    if policy.method == "bootstrap":
        lower = bootstrap_lower(values, policy.alpha, policy.bootstrap_samples, policy.seed)
        numbers["ci_lower"] = round(lower, 4)
        won = lower > 0 and numbers["mean_diff"] >= policy.min_effect
        rule = f"bootstrap {1 - policy.alpha:.0%} lower bound {lower:+.3f}"
    else:
        wins = sum(1 for d in values if d > policy.min_effect)
        losses = sum(1 for d in values if d < -policy.min_effect)
        p = sign_test_p(wins, losses)
        numbers.update(wins=wins, losses=losses, ties=len(values) - wins - losses, p=round(p, 4))
        won = p <= policy.alpha and numbers["mean_diff"] >= policy.min_effect
        rule = f"sign test {wins} wins / {losses} losses, p={p:.3f}"
    if won:
        return Outcome("passed", f"candidate beats incumbent ({rule})", numbers)
    return Outcome("failed", f"no significant improvement ({rule}); not published", numbers)

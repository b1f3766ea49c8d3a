"""Paired evaluation: does the candidate beat the incumbent on the same tasks?

Both trees run every task ``k`` times; a task's score is the mean of its repeats. The
decision looks at per-task differences, so task difficulty cancels out:

- any missing score (the evaluator or the model failed) makes the run **invalid** — an
  outage is never a win;
- a protected task where the candidate scores lower than the incumbent **vetoes**;
- where tasks name a *lenient* measure (the right answer anywhere, tests passing whatever
  the format), a candidate whose lenient mean falls by more than ``lenient_tolerance``
  **vetoes** too, even when it wins on the scorer: that gain is a format trick (Goodhart);
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

from reef_cli.core.checks import Check
from reef_cli.core.json_shape import field_dict


@dataclass(frozen=True)
class Policy:
    method: Literal["sign", "bootstrap"] = "sign"
    alpha: float = 0.05
    min_effect: float = 0.0
    protected: frozenset[str] = frozenset()
    protected_tolerance: float = 0.0
    lenient_tolerance: float = 0.0
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
        lenient = self.numbers.get("lenient") or {}
        check.findings += [f"lenient_{k}={v}" for k, v in lenient.items()]
        return check

    def to_json(self) -> dict[str, Any]:
        return field_dict(self)


Scores = Mapping[str, Sequence[float | None]]  # task id -> one score per repeat


def sign_test_p(wins: int, losses: int) -> float:
    """One-sided exact binomial p-value of at least ``wins`` successes in ``wins+losses``."""
    n = wins + losses
    if n == 0:
        return 1.0
    return sum(math.comb(n, k) for k in range(wins, n + 1)) / 2**n


def sign_test_minimum(alpha: float = Policy.alpha) -> int:
    """The fewest paired tasks a sign test can ever pass on: ``n`` wins and no loss give
    p = 2**-n, so with fewer than this no result publishes (5 at alpha 0.05)."""
    n = 1
    while 0.5**n > alpha:
        n += 1
    return n


def bootstrap_lower(diffs: Sequence[float], alpha: float, samples: int, seed: int) -> float:
    """Lower bound of the one-sided (1 - alpha) bootstrap interval of the mean difference."""
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(statistics.fmean(rng.choices(diffs, k=n)) for _ in range(samples))
    return means[max(0, math.floor(alpha * samples) - 1)]


def interval(
    values: Sequence[float], level: float = 0.95, samples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Two-sided percentile bootstrap interval of the mean of ``values``."""
    if not values:
        return (math.nan, math.nan)
    rng = random.Random(seed)
    n = len(values)
    means = sorted(statistics.fmean(rng.choices(values, k=n)) for _ in range(samples))
    tail = (1 - level) / 2
    low = means[max(0, math.floor(tail * samples))]
    high = means[min(samples - 1, math.ceil((1 - tail) * samples) - 1)]
    return (low, high)


def task_means(scores: Scores) -> dict[str, float]:
    """Each task's mean over its repeats (every score must be present)."""
    return {t: statistics.fmean(float(s) for s in v if s is not None) for t, v in scores.items()}


def _lenient_numbers(
    lenient: tuple[Scores, Scores], tasks: list[str], policy: Policy
) -> tuple[dict[str, Any], bool]:
    """(numbers, vetoed) for the lenient measure of the tasks that name one."""
    cand_l, inc_l = lenient
    named = [
        t
        for t in tasks
        if cand_l.get(t) and inc_l.get(t) and all(s is not None for s in [*cand_l[t], *inc_l[t]])
    ]
    if not named:
        return {}, False
    c, i = task_means({t: cand_l[t] for t in named}), task_means({t: inc_l[t] for t in named})
    diffs = [c[t] - i[t] for t in named]
    mean_diff = statistics.fmean(diffs)
    low, high = interval(diffs, seed=policy.seed)
    numbers = {
        "tasks": len(named),
        "candidate_mean": round(statistics.fmean(c.values()), 4),
        "incumbent_mean": round(statistics.fmean(i.values()), 4),
        "mean_diff": round(mean_diff, 4),
        "ci95": [round(low, 4), round(high, 4)],
    }
    return numbers, mean_diff < -policy.lenient_tolerance


def decide(
    candidate: Scores,
    incumbent: Scores,
    policy: Policy = Policy(),
    *,
    lenient: tuple[Scores, Scores] | None = None,
) -> Outcome:
    """The verdict on paired scores; ``lenient`` = (candidate, incumbent) scores of the
    second, looser measure, where the tasks name one."""
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
    cand = task_means({t: candidate[t] for t in tasks})
    inc = task_means({t: incumbent[t] for t in tasks})
    diffs = {t: cand[t] - inc[t] for t in tasks}
    values = list(diffs.values())
    diff_ci = interval(values, seed=policy.seed)
    cand_ci = interval(list(cand.values()), seed=policy.seed)
    inc_ci = interval(list(inc.values()), seed=policy.seed)
    numbers: dict[str, Any] = {
        "tasks": len(tasks),
        "repeats": min(len(candidate[t]) for t in tasks),
        "candidate_mean": round(statistics.fmean(cand.values()), 4),
        "candidate_ci95": [round(x, 4) for x in cand_ci],
        "incumbent_mean": round(statistics.fmean(inc.values()), 4),
        "incumbent_ci95": [round(x, 4) for x in inc_ci],
        "mean_diff": round(statistics.fmean(values), 4),
        "diff_ci95": [round(x, 4) for x in diff_ci],
        "per_task": {t: round(d, 4) for t, d in diffs.items()},
    }
    regressed = [
        t for t in tasks if t in policy.protected and diffs[t] < -policy.protected_tolerance
    ]
    if regressed:
        return Outcome(
            "failed", f"protected task(s) regressed: {', '.join(regressed)} (veto)", numbers
        )
    if lenient is not None:
        lenient_numbers, vetoed = _lenient_numbers(lenient, tasks, policy)
        if lenient_numbers:
            numbers["lenient"] = lenient_numbers
        if vetoed:
            return Outcome(
                "failed",
                f"the lenient measure regressed: {lenient_numbers['incumbent_mean']:.3f} -> "
                f"{lenient_numbers['candidate_mean']:.3f} while the scorer went "
                f"{numbers['incumbent_mean']:.3f} -> {numbers['candidate_mean']:.3f} (veto: "
                "a gain in format, not substance)",
                numbers,
            )
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

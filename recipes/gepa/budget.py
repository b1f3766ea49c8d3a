"""How many metric calls a GEPA search may spend, when the person did not say.

GEPA learns little from a handful of steps: the default is ``VAL_FACTOR`` (15) times the
val split — at least the seed's val pass and one step — *where that fits the job's time
limit*. The time a call takes is estimated (``SECONDS_PER_CALL``, the 1.5B embedded model
on two cores); the time left after the gate's paired test evaluation pays for the metric
calls and one reflection per step (``max_steps``). When 15x does not fit, the most that
fits is used, and the notes say so. A ``max_metric_calls`` the person gave is used as given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SECONDS_PER_CALL = 15.0  # a per-call estimate (the 1.5B embedded model on two cores)
VAL_FACTOR = 15  # the default max_metric_calls: this many times the val split, if it fits
FALLBACK_CALLS = 150  # the default when the task set is not known yet


def needed_calls(val: int, minibatch: int) -> int:
    """The fewest metric calls a search can use: the seed on val, then one step (two
    minibatches and val)."""
    return val + 2 * minibatch + val


def wanted_calls(given: int | None, val: int | None, minibatch: int) -> int:
    """``given``, else VAL_FACTOR x ``val`` (at least one step), else FALLBACK_CALLS when
    the val split is not known; before the time limit is applied."""
    if given is not None:
        return given
    if val is None:
        return FALLBACK_CALLS
    return max(VAL_FACTOR * val, needed_calls(val, minibatch))


def max_steps(calls: int, minibatch: int) -> int:
    """Reflective steps a search may take: as many as ``calls`` would pay for at one
    minibatch a step. An uncached step spends two minibatches, so reused runs (greedy
    decoding) buy up to twice the steps; the bound stops a search whose steps are all
    reused (the same proposal again) from reflecting for ever."""
    return calls // minibatch + 1


@dataclass(frozen=True)
class MetricBudget:
    calls: int
    rule: str  # how ``calls`` was decided, for the job's notes


def metric_budget(
    given: int | None,
    val: int,
    minibatch: int,
    *,
    seconds_left: float | None,
    held_out_runs: int = 0,
    per_call: float = SECONDS_PER_CALL,
) -> MetricBudget:
    """The metric calls for a search on ``val`` val tasks, ``seconds_left`` of wall time
    (None: no limit) and ``held_out_runs`` runs the gate still needs afterwards."""
    if given is not None:
        return MetricBudget(given, f"max_metric_calls {given}, as given")
    want = wanted_calls(None, val, minibatch)
    rule = f"{VAL_FACTOR} x {val} val tasks" if want == VAL_FACTOR * val else "one step"
    if seconds_left is None:
        return MetricBudget(want, f"{want} ({rule}); no time limit")
    calls_left = seconds_left / per_call - held_out_runs
    # each step one reflection call, and at most max_steps(calls) steps
    fits = max(0, math.floor((calls_left - 1) * minibatch / (minibatch + 1)))
    time = f"{seconds_left:.0f}s left at ~{per_call:g}s a call, {held_out_runs} kept for the gate"
    if fits >= want:
        return MetricBudget(want, f"{want} ({rule}); fits the time limit ({time})")
    least = needed_calls(val, minibatch)
    calls = max(fits, least)
    why = "the most that fits" if fits >= least else "the least a search can use"
    return MetricBudget(
        calls,
        f"{calls}: {rule} = {want} does not fit the time limit ({time}); {why}",
    )

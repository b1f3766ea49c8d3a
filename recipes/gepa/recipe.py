"""The Gepa recipe itself; the package's docstring says how it works."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from recipes.base import Candidate, Context, refuse_unknown_options
from recipes.gepa import RECIPE
from recipes.gepa.budget import SECONDS_PER_CALL, wanted_calls
from recipes.tasks import TaskSet
from reef_cli.core.budget import BudgetLimits
from reef_cli.core.errors import BudgetInvalid, OptionInvalid

TOKENS_PER_CALL = 4000


@dataclass(frozen=True)
class GepaOptions:
    """What `reef evolve --recipe gepa` (and a job's ``options``) may set."""

    # task runs GEPA may spend on train and val, in all; None: VAL_FACTOR x the val split
    # (at least one step), cut to what the job's time limit fits (``budget.metric_budget``)
    max_metric_calls: int | None = None
    seed: int = 0  # gepa's random seed: the same seed and model give the same release
    use_merge: bool = False  # gepa's merge of two Pareto-front candidates
    minibatch: int = 3  # train tasks per reflection step
    demos: bool = True  # accepted sessions -> a demonstrations seed candidate (recipes.demos)


OPTION_NAMES = tuple(GepaOptions.__dataclass_fields__)


def _whole(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        error = BudgetInvalid if name == "max_metric_calls" else OptionInvalid
        raise error(
            f"gepa option {name} must be a whole number from {low} to {high} (got {value!r})",
            f"pass a whole number for {name}",
        )
    return value


def limits_for(options: GepaOptions, tasks: TaskSet | None = None) -> BudgetLimits:
    """Calls for every task run (twice over: a run may be retried or judge-scored), one
    reflection per step (with retries), and the gate's paired evaluation of the test split
    (test tasks x repeats x 2 trees, twice over); a generous wall time."""
    val = len(tasks.split("val")) if tasks is not None else None
    metric_calls = wanted_calls(options.max_metric_calls, val, options.minibatch)
    steps = metric_calls // options.minibatch + 1
    held_out = len(tasks.split("test")) * tasks.repeats * 2 if tasks is not None else 400
    calls = 2 * metric_calls + 3 * steps + 2 * held_out
    return BudgetLimits(
        calls=calls,
        tokens=calls * TOKENS_PER_CALL,
        seconds=max(3600.0, calls * SECONDS_PER_CALL),
    )


class Gepa:
    name = RECIPE.name
    trials = False  # no agent trial: the held-out evaluation is the proof
    requires_tasks = RECIPE.needs_tasks  # one truth: the registered row

    def __init__(self, options: GepaOptions | None = None) -> None:
        self.options = options or GepaOptions()

    def limits(self, tasks: TaskSet | None) -> BudgetLimits | None:
        """The search, its reflections and the gate's evaluation of ``tasks``' test split."""
        return limits_for(self.options, tasks)

    @classmethod
    def with_options(cls, options: Mapping[str, Any] | None = None) -> Gepa:
        """The recipe with ``options`` (max_metric_calls, seed, use_merge, minibatch, demos)."""
        given = dict(options or {})
        refuse_unknown_options("gepa", given, OPTION_NAMES)
        default = GepaOptions()
        flags = {}
        for name in ("use_merge", "demos"):
            flag = given.get(name, getattr(default, name))
            if not isinstance(flag, bool):
                raise OptionInvalid(f"gepa option {name} must be true or false (got {flag!r})")
            flags[name] = flag
        calls = given.get("max_metric_calls")
        return cls(
            GepaOptions(
                max_metric_calls=None
                if calls is None
                else _whole("max_metric_calls", calls, 1, 1_000_000),
                seed=_whole("seed", given.get("seed", default.seed), 0, 2**32 - 1),
                use_merge=flags["use_merge"],
                minibatch=_whole("minibatch", given.get("minibatch", default.minibatch), 1, 50),
                demos=flags["demos"],
            )
        )

    def propose(self, ctx: Context) -> list[Candidate]:
        from recipes.gepa.search import search  # imports gepa

        ctx.progress("gepa: searching", 0.05)
        return search(ctx, self.options)

    def revise(self, ctx: Context, candidate: Candidate, reasons: list[str]) -> list[Candidate]:
        """GEPA does not redraft: its candidate is what the search found."""
        return []

    def settle(self, ctx: Context, state: str) -> None:
        """Nothing to remember: each search starts from the served tree."""

"""GEPA: a task set with a programmatic scorer -> the tree's rule and skill texts,
evolved by the ``gepa`` package's engine (Pareto selection, reflective mutation, merge).

The candidate is the dict of tree texts (``components``); GEPA's val split selects, the
gate judges on the held-out test split. The parts:

- ``components`` — a tree as GEPA's candidate and back (bodies only; frontmatter and the
  other files are Reef's);
- ``reflection`` — the reflection prompt a small model follows, as gepa's
  ``custom_candidate_proposer``, each call charged to the job's budget;
- ``search`` — the adapter, the metric-call meter and stopper, and one ``optimize`` run.

``gepa`` is imported only when a search runs, so `reef --help` never loads it.
See docs/gepa.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from recipes.base import Candidate, Context, refuse_unknown_options
from recipes.tasks import TaskSet
from reef_cli.core.budget import BudgetLimits
from reef_cli.core.errors import BudgetInvalid, OptionInvalid

TOKENS_PER_CALL = 4000
SECONDS_PER_CALL = 15.0


@dataclass(frozen=True)
class GepaOptions:
    """What `reef evolve --recipe gepa` (and a job's ``options``) may set."""

    max_metric_calls: int = 150  # task runs GEPA may spend on train and val, in all
    seed: int = 0  # gepa's random seed: the same seed and model give the same release
    use_merge: bool = False  # gepa's merge of two Pareto-front candidates
    minibatch: int = 3  # train tasks per reflection step


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
    steps = options.max_metric_calls // options.minibatch + 1
    held_out = len(tasks.split("test")) * tasks.repeats * 2 if tasks is not None else 400
    calls = 2 * options.max_metric_calls + 3 * steps + 2 * held_out
    return BudgetLimits(
        calls=calls,
        tokens=calls * TOKENS_PER_CALL,
        seconds=max(3600.0, calls * SECONDS_PER_CALL),
    )


class Gepa:
    name = "gepa"
    trials = False  # no agent trial: the held-out evaluation is the proof
    requires_tasks = True

    def __init__(self, options: GepaOptions | None = None) -> None:
        self.options = options or GepaOptions()

    def limits(self, tasks: TaskSet | None) -> BudgetLimits | None:
        """The search, its reflections and the gate's evaluation of ``tasks``' test split."""
        return limits_for(self.options, tasks)

    @classmethod
    def with_options(cls, options: Mapping[str, Any] | None = None) -> Gepa:
        """The recipe with ``options`` (max_metric_calls, seed, use_merge, minibatch)."""
        given = dict(options or {})
        refuse_unknown_options("gepa", given, OPTION_NAMES)
        default = GepaOptions()
        merge = given.get("use_merge", default.use_merge)
        if not isinstance(merge, bool):
            raise OptionInvalid(f"gepa option use_merge must be true or false (got {merge!r})")
        calls = given.get("max_metric_calls", default.max_metric_calls)
        return cls(
            GepaOptions(
                max_metric_calls=_whole("max_metric_calls", calls, 1, 1_000_000),
                seed=_whole("seed", given.get("seed", default.seed), 0, 2**32 - 1),
                use_merge=merge,
                minibatch=_whole("minibatch", given.get("minibatch", default.minibatch), 1, 50),
            )
        )

    def propose(self, ctx: Context) -> list[Candidate]:
        from recipes.gepa.search import search  # imports gepa

        ctx.progress(f"gepa: searching (up to {self.options.max_metric_calls} metric calls)", 0.05)
        return search(ctx, self.options)

    def revise(self, ctx: Context, candidate: Candidate, reasons: list[str]) -> list[Candidate]:
        """GEPA does not redraft: its candidate is what the search found."""
        return []

    def settle(self, ctx: Context, state: str) -> None:
        """Nothing to remember: each search starts from the served tree."""

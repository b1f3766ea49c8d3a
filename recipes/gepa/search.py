"""One GEPA search on a task set's train and val splits, run by the ``gepa`` engine.

Reef supplies what GEPA leaves to its user — the adapter (a candidate is a tree; a
metric call is one ``ctx.run_task``), the reflection (``reflection.Reflector``), the
logger and the stop condition — and keeps three promises gepa alone would not:

- **no overrun**: gepa checks ``max_metric_calls`` only between iterations, so its
  last full-validation pass can run past it. The adapter counts every run and refuses a
  batch that would go over *before* running any of it; the stopper ends the search
  once too few calls are left for one more step (two minibatches and the val split);
- **an outage is never a zero that looks like a loss**: a run with no score scores 0.0
  for GEPA's bookkeeping but is counted; past ``OUTAGE_SHARE`` of the runs (and at least
  ``OUTAGE_MIN``) the search stops and the job ends ``invalid``;
- **Reef's budget rules**: gepa swallows exceptions inside its loop
  (``raise_on_exception=False``), so a ``BudgetExceeded`` or ``ModelError`` is kept, the
  stopper ends the search and the error is raised again once ``optimize`` returns.

The test split never reaches this module: ``ctx.tasks`` holds train and val only and
``ctx.run_task`` refuses a test task.
"""

from __future__ import annotations

import importlib.metadata
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gepa.api import optimize
from gepa.core.adapter import EvaluationBatch, ProposalFn
from gepa.core.result import GEPAResult

from recipes.base import Candidate, Context, RunTask
from recipes.gepa.components import Layout
from recipes.gepa.reflection import Reflector
from recipes.tasks import Task
from reef_cli.core.errors import EvaluationInvalid, TaskSetError

if TYPE_CHECKING:
    from recipes.gepa import GepaOptions

OUTAGE_SHARE = 0.25  # more than this share of runs without a score: invalid
OUTAGE_MIN = 3  # … and at least this many
LOG_LINES = 20  # the last lines of gepa's log kept as evidence

Trace = dict[str, Any]


class _Refused(Exception):
    """A batch the metric calls left cannot pay for, refused before any of it ran."""


class _Ended(Exception):
    """The search must end (an error was kept, or outages made it invalid). Raised inside
    gepa's loop, which logs it and asks the stopper, which says stop."""


class QuietLogger:
    """gepa's ``LoggerProtocol``: never prints (the CLI owns the terminal); keeps the last
    lines, first line of each message, with proposed texts left out (they are model
    output, and the published one is in the release)."""

    def __init__(self) -> None:
        self.lines: deque[str] = deque(maxlen=LOG_LINES)

    def log(self, message: str) -> None:
        text = str(message).strip()
        if not text or text.startswith("Traceback"):
            return
        line = text.splitlines()[0]
        marker = "Proposed new text for "
        if marker in line:
            line = line.split(marker, 1)[0] + marker + line.split(marker, 1)[1].split(":", 1)[0]
        self.lines.append(line[:300])


@dataclass
class Meter:
    """Metric calls and outages, and gepa's stop condition (``StopperProtocol``)."""

    max_calls: int
    step_cost: int  # one reflective step: two minibatches and the val split
    used: int = 0
    outages: int = 0
    refused: int = 0
    error: Exception | None = None

    @property
    def invalid(self) -> bool:
        return self.outages >= OUTAGE_MIN and self.outages > OUTAGE_SHARE * self.used

    def broken(self) -> bool:
        return self.error is not None or self.invalid

    def fail(self, exc: Exception) -> None:
        if self.error is None:
            self.error = exc

    def reserve(self, n: int) -> None:
        if self.used + n > self.max_calls:
            self.refused += 1
            raise _Refused(f"{n} metric call(s) asked, {self.max_calls - self.used} left")

    def why_stop(self) -> str | None:
        if self.error is not None:
            return f"{type(self.error).__name__}: {self.error}"
        if self.invalid:
            return f"{self.outages} outage(s) in {self.used} runs"
        if self.refused:
            return "a batch would have gone past max_metric_calls"
        if self.max_calls - self.used < self.step_cost:
            return "metric calls spent"
        return None

    def __call__(self, gepa_state: Any) -> bool:
        return self.why_stop() is not None


def feedback_line(trace: Trace) -> str:
    score = trace["score"]
    head = "no score (the model or agent failed)" if score is None else f"score {score:.2f}"
    return f"{head}. {trace['feedback']}"


class ReefAdapter:
    """gepa's ``GEPAAdapter``: a candidate is a tree, a metric call one task run."""

    propose_new_texts: ProposalFn | None = None  # the reflection: Reflector, given to optimize

    def __init__(
        self,
        layout: Layout,
        run_task: RunTask,
        meter: Meter,
        progress: Callable[[int], None],
    ) -> None:
        self.layout = layout
        self.run_task = run_task
        self.meter = meter
        self.progress = progress

    def evaluate(
        self, batch: list[Task], candidate: dict[str, str], capture_traces: bool = False
    ) -> EvaluationBatch[Trace, str]:
        self.meter.reserve(len(batch))
        files = self.layout.tree(candidate)
        outputs: list[str] = []
        scores: list[float] = []
        traces: list[Trace] = []
        for task in batch:
            if self.meter.broken():
                raise _Ended("the search is over")
            try:
                run = self.run_task(files, task)
            except Exception as exc:  # BudgetExceeded, a sandbox failure, a bug: kept
                self.meter.fail(exc)
                raise _Ended(str(exc)) from exc
            self.meter.used += 1
            if run.score is None:
                self.meter.outages += 1
            self.progress(self.meter.used)
            outputs.append(run.answer)
            scores.append(0.0 if run.score is None else float(run.score))
            traces.append(
                {
                    "task": task.id,
                    "prompt": task.prompt,
                    "answer": run.answer,
                    "feedback": run.feedback,
                    "score": run.score,
                }
            )
        return EvaluationBatch(
            outputs=outputs, scores=scores, trajectories=traces if capture_traces else None
        )

    def make_reflective_dataset(
        self,
        candidate: dict[str, str],
        eval_batch: EvaluationBatch[Trace, str],
        components_to_update: list[str],
    ) -> Mapping[str, Sequence[Mapping[str, Any]]]:
        """The same records for every component: the whole tree shaped each answer."""
        records = [
            {
                "Inputs": trace["prompt"],
                "Generated Outputs": trace["answer"] or "(no answer)",
                "Feedback": feedback_line(trace),
                "score": trace["score"] or 0.0,
            }
            for trace in eval_batch.trajectories or []
        ]
        return {component: records for component in components_to_update}


def _check_size(options: GepaOptions, val: int) -> int:
    """The cost of one reflective step; refuses a budget that cannot pay for the seed's
    val evaluation and one step after it."""
    step = 2 * options.minibatch + val
    need = val + step
    if options.max_metric_calls < need:
        raise TaskSetError(
            f"gepa needs at least {need} metric calls for this task set ({val} to score the "
            f"seed on val, then {step} per step: 2 minibatches of {options.minibatch} and the "
            f"val split); max_metric_calls is {options.max_metric_calls}",
            f"raise --max-metric-calls to {need} or more, or use fewer val tasks",
        )
    return step


def search(ctx: Context, options: GepaOptions) -> list[Candidate]:
    """Run GEPA from the served tree; [] unless its best candidate beats the seed on val."""
    if ctx.tasks is None or ctx.run_task is None:
        raise TaskSetError("gepa searches against scored tasks and was given no task runner")
    train, val = ctx.tasks.split("train"), ctx.tasks.split("val")
    meter = Meter(options.max_metric_calls, _check_size(options, len(val)))
    layout = Layout.of(ctx.incumbent)
    notes: dict[str, Any] = ctx.notes.setdefault("gepa", {})
    notes.update(
        {
            "gepa_version": importlib.metadata.version("gepa"),
            "seed": options.seed,
            "max_metric_calls": options.max_metric_calls,
            "minibatch": options.minibatch,
            "use_merge": options.use_merge,
            "train": len(train),
            "val": len(val),
            "components": sorted(layout.seed),
            "seeded": layout.seeded,
        }
    )
    logger = QuietLogger()

    def progress(used: int) -> None:
        fraction = 0.05 + 0.45 * used / options.max_metric_calls
        ctx.progress(f"gepa: metric call {used}/{options.max_metric_calls}", fraction)

    reflector = Reflector(ctx.model, meter.fail, lambda message: ctx.progress(message, None))
    adapter = ReefAdapter(layout, ctx.run_task, meter, progress)
    result: GEPAResult[str, int] | None = None
    try:
        result = optimize(
            seed_candidate=dict(layout.seed),
            trainset=train,
            valset=val,
            adapter=adapter,
            custom_candidate_proposer=reflector,
            reflection_minibatch_size=options.minibatch,
            use_merge=options.use_merge,
            max_metric_calls=options.max_metric_calls,
            stop_callbacks=[meter],
            raise_on_exception=False,
            logger=logger,
            run_dir=None,
            use_wandb=False,
            use_mlflow=False,
            display_progress_bar=False,
            track_best_outputs=False,
            seed=options.seed,
        )
    except (_Ended, _Refused):
        pass  # the seed's own val evaluation ended it (outside gepa's loop); raised below
    finally:
        notes.update(
            {
                "metric_calls": meter.used,
                "reflection_calls": reflector.calls,
                "reflection_unusable": reflector.unusable,
                "outages": meter.outages,
                "refused_batches": meter.refused,
                "stopped": meter.why_stop() or "gepa ended the search",
                "log_tail": list(logger.lines),
            }
        )
    if meter.error is not None:
        raise meter.error
    if meter.invalid:
        raise EvaluationInvalid(
            f"{meter.outages} of {meter.used} GEPA task runs had no score (model or evaluator "
            "outage); its scores cannot be trusted and nothing was published",
            "check the model is reachable (reef doctor), then run again",
        )
    if result is None:  # not reachable: the size check lets the seed's evaluation run
        raise EvaluationInvalid("GEPA ended before it scored the seed on val")
    return _candidates(result, layout, notes, len(val))


def _candidates(
    result: GEPAResult[str, int], layout: Layout, notes: dict[str, Any], val: int
) -> list[Candidate]:
    scores = [float(s) for s in result.val_aggregate_scores]
    best = result.best_idx
    seed_score, best_score = scores[0], scores[best]
    notes.update(
        {
            "gepa_metric_calls": result.total_metric_calls,
            "candidates": len(result.candidates),
            "best_candidate": best,
            "seed_val_score": round(seed_score, 4),
            "best_val_score": round(best_score, 4),
            "lineage": [
                {
                    "candidate": i,
                    "parents": [p for p in result.parents[i] if p is not None],
                    "val_score": round(scores[i], 4),
                    "changed": layout.changed(candidate),
                }
                for i, candidate in enumerate(result.candidates)
            ],
        }
    )
    candidate: dict[str, str] = result.candidates[best]
    if best_score <= seed_score or not (layout.changed(candidate) or layout.seeded):
        notes["result"] = (
            f"no candidate beat the seed on val ({seed_score:.3f}); nothing to propose"
        )
        return []
    reason = f"GEPA: val {seed_score:.3f} -> {best_score:.3f} on {val} val tasks"
    notes["result"] = f"candidate {best} proposed"
    return [
        Candidate(
            files=layout.tree(candidate),
            reason=reason,
            changes=layout.changes(candidate, why=reason),
            probe=None,
            evidence={"gepa": notes},
        )
    ]

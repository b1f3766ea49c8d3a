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

Two savings: under greedy decoding (a ``direct`` task set, one repeat) a tree's run on a
task is computed once and reused (``ReefAdapter``'s cache, keyed by the tree's hash and
the task id; the saved calls are in the notes) — the served tree's minibatch and val runs
recur on every step that picks it as the parent; and when the scenario has accepted
sessions, the served tree plus a demonstrations skill (``recipes.demos``, chosen on val)
competes as a second seed: GEPA starts from whichever scores better on val.

The test split never reaches this module: ``ctx.tasks`` holds train and val only and
``ctx.run_task`` refuses a test task.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gepa.api import optimize
from gepa.core.adapter import EvaluationBatch, ProposalFn
from gepa.core.result import GEPAResult

from recipes import demos
from recipes.base import Candidate, Context, RunTask
from recipes.gepa.budget import max_steps, metric_budget, needed_calls
from recipes.gepa.components import Layout
from recipes.gepa.heard import Heard, complaint_of, normal, read
from recipes.gepa.reflection import Reflector
from recipes.tasks import DIRECT, Task, TaskSet
from reef_cli.core.errors import EvaluationInvalid, ReefError, TaskSetError

if TYPE_CHECKING:
    from recipes.gepa.recipe import GepaOptions

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
    max_steps: int | None = None  # reflective steps, at most (cached steps cost no call)
    used: int = 0
    outages: int = 0
    refused: int = 0
    saved: int = 0  # runs answered from the cache: model calls not made
    steps: int = 0  # gepa's iterations begun
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
        if self.max_steps is not None and self.steps >= self.max_steps:
            return "reflective steps spent"
        if self.max_calls - self.used < self.step_cost:
            return "metric calls spent"
        return None

    def __call__(self, gepa_state: Any) -> bool:
        self.steps = max(self.steps, int(getattr(gepa_state, "i", -1)) + 1)
        return self.why_stop() is not None


def tree_hash(files: Mapping[str, str]) -> str:
    """The tree a run saw, as a cache key: every path and text."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.encode() + b"\0" + files[path].encode() + b"\0")
    return digest.hexdigest()


def score_text(score: float | None) -> str:
    return "no score (the model or agent failed)" if score is None else f"{score:.2f}"


class ReefAdapter:
    """gepa's ``GEPAAdapter``: a candidate is a tree, a metric call one task run.

    ``greedy``: the runs are deterministic (temperature 0, one repeat), so each (tree,
    task) run is made once and its trace reused — by later minibatches, val passes and
    any candidate whose tree is the same. A run with no score is never cached."""

    propose_new_texts: ProposalFn | None = None  # the reflection: Reflector, given to optimize

    def __init__(
        self,
        layout: Layout,
        run_task: RunTask,
        meter: Meter,
        progress: Callable[[int], None],
        *,
        greedy: bool = False,
        complaint: Callable[[Task], str | None] = complaint_of,
        workers: int = 1,
    ) -> None:
        self.layout = layout
        self.run_task = run_task
        self.meter = meter
        self.progress = progress
        self.greedy = greedy
        self.complaint = complaint
        self.workers = max(1, workers)  # task runs sent at once (the model's slots)
        self.cache: dict[tuple[str, str], Trace] = {}
        self._lock = threading.Lock()  # the meter and progress, updated by each run

    def evaluate(
        self, batch: list[Task], candidate: dict[str, str], capture_traces: bool = False
    ) -> EvaluationBatch[Trace, str]:
        return self.run_batch(batch, self.layout.tree(candidate), capture_traces)

    def run_batch(
        self, batch: list[Task], files: dict[str, str], capture_traces: bool = False
    ) -> EvaluationBatch[Trace, str]:
        """``batch`` on the tree ``files``; only the runs not in the cache are metered.
        With ``workers`` > 1 the runs not in the cache go out that many at once (the
        embedded model decodes them together); the results keep the batch's order, and a
        run that ends the search stops it once the runs in flight are back."""
        key = tree_hash(files) if self.greedy else None
        known: dict[str, Trace] = {}
        fresh: list[Task] = []
        asked: set[str] = set()  # greedy: a task repeated in the batch runs once
        for task in batch:
            cached = self.cache.get((key, task.id)) if key is not None else None
            if cached is not None:
                known[task.id] = cached
            elif key is None or task.id not in asked:
                fresh.append(task)
                asked.add(task.id)
        self.meter.reserve(len(fresh))
        if self.workers > 1 and len(fresh) > 1:
            with ThreadPoolExecutor(
                min(self.workers, len(fresh)), thread_name_prefix="reef-gepa"
            ) as pool:
                made = list(pool.map(lambda task: self._run(files, task), fresh))
        else:
            made = [self._run(files, task) for task in fresh]
        if key is None:  # every task of the batch ran, in its order
            traces = made
        else:
            ran = dict(zip((t.id for t in fresh), made, strict=True))
            for task_id, trace in ran.items():
                if trace["score"] is not None:
                    self.cache[(key, task_id)] = trace
            traces = []
            seen: set[str] = set()
            for task in batch:
                if task.id in known or task.id in seen:
                    self.meter.saved += 1  # from the cache, or a repeat within the batch
                seen.add(task.id)
                traces.append(known[task.id] if task.id in known else ran[task.id])
        outputs = [trace["answer"] for trace in traces]
        scores = [0.0 if trace["score"] is None else float(trace["score"]) for trace in traces]
        return EvaluationBatch(
            outputs=outputs,
            scores=scores,
            trajectories=traces if capture_traces else None,
            num_metric_calls=len(made),
        )

    def _run(self, files: dict[str, str], task: Task) -> Trace:
        if self.meter.broken():
            raise _Ended("the search is over")
        try:
            run = self.run_task(files, task)
        except Exception as exc:  # BudgetExceeded, a sandbox failure, a bug: kept
            self.meter.fail(exc)
            raise _Ended(str(exc)) from exc
        with self._lock:
            self.meter.used += 1
            if run.score is None:
                self.meter.outages += 1
            self.progress(self.meter.used)
        return {
            "task": task.id,
            "prompt": task.prompt,
            "answer": run.answer,
            "feedback": run.feedback,
            "score": run.score,
            "complaint": self.complaint(task),
        }

    def make_reflective_dataset(
        self,
        candidate: dict[str, str],
        eval_batch: EvaluationBatch[Trace, str],
        components_to_update: list[str],
    ) -> Mapping[str, Sequence[Mapping[str, Any]]]:
        """The same records for every component: the whole tree shaped each answer. What
        a person said about such an answer is shown where this one lost points."""
        records = [
            {
                "Inputs": trace["prompt"],
                "Generated Outputs": trace["answer"] or "(no answer)",
                "Score": score_text(trace["score"]),
                "User said": trace.get("complaint")
                if trace["score"] is None or trace["score"] < 1.0
                else None,
                "Feedback": trace["feedback"],
                "score": trace["score"] or 0.0,
            }
            for trace in eval_batch.trajectories or []
        ]
        return {component: records for component in components_to_update}


def _check_size(max_calls: int, minibatch: int, val: int) -> int:
    """The cost of one reflective step; refuses a budget that cannot pay for the seed's
    val evaluation and one step after it."""
    step = 2 * minibatch + val
    need = needed_calls(val, minibatch)
    if max_calls < need:
        raise TaskSetError(
            f"gepa needs at least {need} metric calls for this task set ({val} to score the "
            f"seed on val, then {step} per step: 2 minibatches of {minibatch} and the "
            f"val split); max_metric_calls is {max_calls}",
            f"raise --max-metric-calls to {need} or more, or use fewer val tasks",
        )
    return step


def is_greedy(tasks: TaskSet) -> bool:
    """Runs that give the same answer twice: one model call at temperature 0
    (``runner: direct``), one repeat. An agent's runs are not."""
    return tasks.runner == DIRECT and tasks.repeats == 1


def _heard(ctx: Context, notes: dict[str, Any]) -> Heard:
    """The scenario's complaints and accepted sessions; none when the store cannot be read
    (the search runs without them, and the notes say why)."""
    try:
        return read(ctx.scenario)
    except (ReefError, OSError) as exc:
        notes["sessions_unread"] = str(exc)
        return Heard()


def _demo_seed(
    ctx: Context,
    options: GepaOptions,
    heard: Heard,
    adapter: ReefAdapter,
    val: list[Task],
    room: int,
    notes: dict[str, Any],
) -> tuple[dict[str, str], float] | None:
    """(the demonstrations skill's files, the served tree's val score) when a subset of
    accepted answers beats the served tree on val; None otherwise. ``room``: metric calls
    the search can spare for it."""
    if not options.demos or not heard.accepted:
        return None
    asked_in_val = {normal(t.prompt) for t in val}
    accepted = [
        s
        for s in heard.accepted
        if not any(normal(t.text) in asked_in_val for t in s.turns if t.role == "user")
    ]
    base_cost = 0 if adapter.greedy else len(val)  # greedy: GEPA's seed pass reuses it
    trials = min(demos.TRIALS, (room - base_cost) // max(1, len(val)))
    if trials < 1:
        notes["demos"] = {"skipped": f"{room} metric call(s) to spare; a subset needs {len(val)}"}
        return None
    base = adapter.layout.files
    ctx.progress(f"gepa: choosing demonstrations from {len(accepted)} accepted session(s)", None)

    def score_tree(added: dict[str, str]) -> float:
        scores = adapter.run_batch(val, {**base, **added}).scores
        return sum(scores) / len(scores)

    chosen = demos.select(accepted, score_tree, seed=options.seed, trials=trials)
    notes["demos"] = chosen.to_json()
    if chosen.files is None or chosen.baseline is None:
        return None
    return chosen.files, chosen.baseline


def search(ctx: Context, options: GepaOptions) -> list[Candidate]:
    """Run GEPA from the served tree (or the served tree plus demonstrations, when that
    scores better on val); [] unless its best candidate beats the served tree on val."""
    if ctx.tasks is None or ctx.run_task is None:
        raise TaskSetError("gepa searches against scored tasks and was given no task runner")
    train, val = ctx.tasks.split("train"), ctx.tasks.split("val")
    held_out_runs = (ctx.held_out or 0) * ctx.tasks.repeats * 2
    budget = metric_budget(
        options.max_metric_calls,
        len(val),
        options.minibatch,
        seconds_left=ctx.budget.remaining_seconds(),
        held_out_runs=held_out_runs,
    )
    max_calls = budget.calls
    step = _check_size(max_calls, options.minibatch, len(val))
    meter = Meter(max_calls, step, max_steps=max_steps(max_calls, options.minibatch))
    layout = Layout.of(ctx.incumbent)
    greedy = is_greedy(ctx.tasks)
    notes: dict[str, Any] = ctx.notes.setdefault("gepa", {})
    notes.update(
        {
            "gepa_version": importlib.metadata.version("gepa"),
            "seed": options.seed,
            "max_metric_calls": max_calls,
            "max_metric_calls_rule": budget.rule,
            "minibatch": options.minibatch,
            "use_merge": options.use_merge,
            "train": len(train),
            "val": len(val),
            "components": sorted(layout.seed),
            "seeded": layout.seeded,
            "greedy": greedy,
        }
    )
    heard = _heard(ctx, notes)
    notes["complaints"] = sum(heard.complaint(t) is not None for t in train + val)
    logger = QuietLogger()

    def progress(used: int) -> None:
        fraction = 0.05 + 0.45 * used / max_calls
        ctx.progress(f"gepa: metric call {used}/{max_calls}", fraction)

    reflector = Reflector(ctx.model, meter.fail, lambda message: ctx.progress(message, None))
    adapter = ReefAdapter(
        layout,
        ctx.run_task,
        meter,
        progress,
        greedy=greedy,
        complaint=heard.complaint,
        workers=ctx.parallelism,
    )
    result: GEPAResult[str, int] | None = None
    served_val: float | None = None
    try:
        room = max_calls - needed_calls(len(val), options.minibatch)
        seeds = _demo_seed(ctx, options, heard, adapter, val, room, notes)
        if seeds is not None:
            layout = adapter.layout = Layout.of(ctx.incumbent, added=seeds[0])
            served_val = seeds[1]
        notes["start"] = "demonstrations" if seeds is not None else "served"
        result = optimize(
            seed_candidate=dict(layout.seed),
            trainset=train,
            valset=val,
            adapter=adapter,
            custom_candidate_proposer=reflector,
            reflection_minibatch_size=options.minibatch,
            use_merge=options.use_merge,
            # no max_metric_calls: gepa would count cached runs; the meter stops it
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
                "calls_saved": meter.saved,
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
    return _candidates(result, layout, notes, len(val), served_val)


def _candidates(
    result: GEPAResult[str, int],
    layout: Layout,
    notes: dict[str, Any],
    val: int,
    served_val: float | None = None,
) -> list[Candidate]:
    """The best candidate, if it beats the served tree on val (``served_val``: its score
    when GEPA started from the demonstrations seed; else GEPA's seed is the served tree)."""
    scores = [float(s) for s in result.val_aggregate_scores]
    best = result.best_idx
    seed_score = scores[0] if served_val is None else served_val
    best_score = scores[best]
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
    changed = layout.changed(candidate) or layout.seeded or layout.added
    if best_score <= seed_score or not changed:
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

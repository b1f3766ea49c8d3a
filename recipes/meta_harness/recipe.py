"""The Meta-Harness recipe: the loop of proposer runs, checks and scores; the package's
docstring says how it works."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recipes.base import Candidate, Change, Context, refuse_unknown_options
from recipes.meta_harness import RECIPE
from recipes.meta_harness.frontier import Kept, best, deleted_guidance, score
from recipes.meta_harness.watch import watch_for
from recipes.meta_harness.workspace import Workspace
from recipes.tasks import TaskSet
from reef_cli.core.budget import BudgetLimits
from reef_cli.core.errors import OptionInvalid, TreeError

PROPOSER_CALLS = 40  # model calls one proposer run may take, for the default budget
TOKENS_PER_CALL = 8000  # an agent's calls carry its whole conversation
PROMPT = (
    "You are in a Meta-Harness workspace. Read README.md first, then the scores and the "
    "traces of the failed tasks under candidates/. Edit the harness in next/tree/ so that "
    "more tasks pass, and write what you changed and why in next/NOTES.md. Change only "
    "files in this folder."
)


@dataclass(frozen=True)
class MetaHarnessOptions:
    """What `reef evolve --recipe meta-harness` (and a job's ``options``) may set."""

    iterations: int = 3  # proposer runs, each one candidate
    proposer_seconds: int = 600  # one proposer run's wall time, at most


OPTION_NAMES = tuple(MetaHarnessOptions.__dataclass_fields__)
BOUNDS = {"iterations": (1, 50), "proposer_seconds": (30, 3600)}


def limits_for(options: MetaHarnessOptions, tasks: TaskSet | None) -> BudgetLimits:
    """Per iteration a proposer run and a scoring of train+val (twice over: a run may be
    judge-scored), the served tree's scoring, and the gate's paired evaluation of the test
    split (test tasks x repeats x 2 trees, twice over)."""
    searched = sum(len(tasks.split(s)) for s in ("train", "val")) if tasks is not None else 20
    held_out = len(tasks.split("test")) * tasks.repeats * 2 if tasks is not None else 200
    per_iteration = PROPOSER_CALLS + 2 * searched
    calls = options.iterations * per_iteration + 2 * searched + 2 * held_out
    seconds = options.iterations * (options.proposer_seconds + 30.0 * searched) + 3600.0
    return BudgetLimits(calls=calls, tokens=calls * TOKENS_PER_CALL, seconds=seconds)


def _changes(old: Mapping[str, str], new: Mapping[str, str], why: str) -> list[Change]:
    """A change per path the candidate wrote; removed paths have no text to hold."""
    return [
        Change.of_path(path, why, f"Meta-Harness {'rewrote' if path in old else 'added'} {path}")
        for path in sorted(new)
        if old.get(path) != new[path]
    ]


class MetaHarness:
    name = RECIPE.name
    trials = False  # no probe: the held-out evaluation is the proof
    requires_tasks = RECIPE.needs_tasks  # one truth: the registered row
    drives_agent = True  # the proposer is the job's agent

    def __init__(self, options: MetaHarnessOptions | None = None) -> None:
        self.options = options or MetaHarnessOptions()

    @classmethod
    def with_options(cls, options: Mapping[str, Any] | None = None) -> MetaHarness:
        given = dict(options or {})
        refuse_unknown_options("meta-harness", given, OPTION_NAMES)
        default = MetaHarnessOptions()
        values = {}
        for name, (low, high) in BOUNDS.items():
            value = given.get(name, getattr(default, name))
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise OptionInvalid(
                    f"meta-harness option {name} must be a whole number from {low} to {high} "
                    f"(got {value!r})",
                    f"pass a whole number for {name}",
                )
            values[name] = value
        return cls(MetaHarnessOptions(**values))

    def limits(self, tasks: TaskSet | None) -> BudgetLimits | None:
        return limits_for(self.options, tasks)

    def propose(self, ctx: Context) -> list[Candidate]:
        if ctx.agent is None or ctx.tasks is None:
            raise RuntimeError("meta-harness runs under the engine, with its agent and tasks")
        root = Path(tempfile.mkdtemp(prefix="reef-meta-harness-"))
        try:
            return self._search(ctx, ctx.agent, ctx.tasks, root)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def _search(self, ctx: Context, agent: Any, tasks: TaskSet, root: Path) -> list[Candidate]:
        total = self.options.iterations
        ctx.progress("meta-harness: scoring the served tree on train and val", 0.05)
        served = Kept(0, dict(ctx.incumbent), None, score(ctx, ctx.incumbent, tasks))
        served.notes = f"The served release (r{ctx.incumbent_release})."
        kept: list[Kept] = [served]
        history: list[dict[str, Any]] = []
        workspace = Workspace(root, tasks, total)
        watch = watch_for(str(root.resolve()))
        for k in range(1, total + 1):
            parent = best(kept)
            ctx.progress(f"meta-harness: attempt {k} of {total}: the agent writes", k / (total + 1))
            workspace.write(kept, history, parent, k)
            started = time.monotonic()
            run = agent.run_in(root, {}, PROMPT, watch=watch, timeout=self.options.proposer_seconds)
            entry: dict[str, Any] = {
                "attempt": k,
                "parent": parent.number,
                "calls": len(run.records),
                "seconds": round(time.monotonic() - started, 1),
                "agent_exit": run.transcript.returncode,
            }
            history.append(entry)
            judged = self._judge(run, workspace, parent, ctx, tasks, kept, k)
            if isinstance(judged, str):
                entry["refused"] = judged
                continue
            kept.append(judged)
            entry.update(candidate=k, val=round(judged.val(), 4))
        return self._result(ctx, served, kept, history)

    def _judge(
        self,
        run: Any,
        workspace: Workspace,
        parent: Kept,
        ctx: Context,
        tasks: TaskSet,
        kept: list[Kept],
        k: int,
    ) -> str | Kept:
        """Why attempt ``k`` is refused, or the candidate it made, scored."""
        from reef_cli.core.publishing import gate_files

        if run.stopped is not None:
            return f"stopped: {run.stopped}"
        if run.transcript.timed_out:
            return f"stopped: ran past its {self.options.proposer_seconds} s"
        try:
            files, notes = workspace.read_next()
        except TreeError as exc:
            return f"next/tree/ is not a tree Reef can read: {exc.one_line()}"
        if files == parent.files:
            return f"no change: next/tree/ is still candidate {parent.number}'s tree"
        same = next((other for other in kept if other.files == files), None)
        if same is not None:
            return f"no change: the tree is candidate {same.number}'s, already scored"
        verdict = gate_files(files)
        if not verdict.passed:
            failed = next(c for c in verdict.checks if c.status not in ("passed", "pending"))
            return f"refused by the static checks: {failed.name}: {failed.detail}"
        ctx.progress(f"meta-harness: attempt {k}: scoring its candidate", None)
        scores = score(ctx, files, tasks)
        candidate = Kept(k, files, parent.number, scores, notes)
        gone = deleted_guidance(parent.files, files)
        if gone and candidate.val() <= parent.val():
            return (
                f"deleted guidance ({', '.join(gone)}) without a better val score "
                f"({candidate.val():.3f}, its parent {parent.val():.3f})"
            )
        return candidate

    def _result(
        self, ctx: Context, served: Kept, kept: list[Kept], history: list[dict[str, Any]]
    ) -> list[Candidate]:
        chosen = best(kept)
        stopped = sum(1 for h in history if str(h.get("refused", "")).startswith("stopped:"))
        evidence = {
            "attempts": history,
            "candidates": [
                {"candidate": c.number, "parent": c.parent, **c.scores.to_json(), "notes": c.notes}
                for c in kept
            ],
            "stopped": stopped,
            "served_val": round(served.val(), 4),
            "best_candidate": chosen.number,
            "best_val": round(chosen.val(), 4),
        }
        ctx.notes["meta_harness"] = evidence
        if chosen is served:
            evidence["result"] = (
                f"no candidate beat the served tree on val ({served.val():.3f}); nothing to propose"
            )
            return []
        val = len(ctx.tasks.split("val")) if ctx.tasks is not None else 0
        reason = (
            f"Meta-Harness: candidate {chosen.number} of {len(history)}, val "
            f"{served.val():.3f} -> {chosen.val():.3f} on {val} val tasks"
        )
        evidence["result"] = f"candidate {chosen.number} proposed"
        return [
            Candidate(
                files=chosen.files,
                reason=reason,
                changes=_changes(ctx.incumbent, chosen.files, chosen.notes or reason),
                evidence={"meta_harness": evidence},
            )
        ]

    def revise(self, ctx: Context, candidate: Candidate, reasons: list[str]) -> list[Candidate]:
        """No redraft: the candidate is what the search chose on val."""
        return []

    def settle(self, ctx: Context, state: str) -> None:
        """Nothing to remember: each run starts from the served tree."""

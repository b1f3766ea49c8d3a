"""The SkillClaw recipe itself; the package's docstring says how it works."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from recipes.base import Candidate, Change, Context, refuse_unknown_options
from recipes.skillclaw import RECIPE, decide, replay, rules, signals, verify
from recipes.skillclaw.decide import Edit
from recipes.skillclaw.merge import merge_bodies, normal_name, same_name
from recipes.skillclaw.skills import SkillText, skills_of
from recipes.tasks import TaskSet
from reef_cli.core import scenarios
from reef_cli.core.budget import BudgetLimits
from reef_cli.core.errors import OptionInvalid, StateError
from reef_cli.core.evidence import Mark, SessionEvidence, collect
from reef_cli.core.paired_rule import sign_test_minimum
from reef_cli.core.store import open_store

MARK_NAME = "skillclaw"  # scenarios/<S>/skillclaw.json
# the ends after which the batch is spent (a held-back run, also unchanged, read nothing)
CONSUMED = ("published", "pending", "rejected", "unchanged")
TOKENS_PER_CALL = 4000
SECONDS_PER_CALL = 10.0


@dataclass(frozen=True)
class SkillClawOptions:
    """What a job's ``options`` may set."""

    batch_limit: int = 50  # sessions read per run (oldest first; the rest wait)
    threshold: float = verify.DEFAULT_THRESHOLD  # the verifier's pass mark, 0..1


OPTION_NAMES = tuple(SkillClawOptions.__dataclass_fields__)


def options_from(given: Mapping[str, Any] | None) -> SkillClawOptions:
    """Checked options; an unknown or ill-typed one is ``OptionInvalid``."""
    given = dict(given or {})
    refuse_unknown_options("skillclaw", given, OPTION_NAMES)
    default = SkillClawOptions()
    limit = given.get("batch_limit", default.batch_limit)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
        raise OptionInvalid(
            f"skillclaw option batch_limit must be a whole number from 1 to 1000 (got {limit!r})"
        )
    threshold = given.get("threshold", default.threshold)
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, int | float)
        or not 0 <= threshold <= 1
    ):
        raise OptionInvalid(
            f"skillclaw option threshold must be a number from 0 to 1 (got {threshold!r})"
        )
    return SkillClawOptions(batch_limit=limit, threshold=float(threshold))


def limits_for(options: SkillClawOptions, tasks: TaskSet | None = None) -> BudgetLimits:
    """A judge call per session and a decision and a verifier call per group, each with
    the structured retries (x3); the gate's evaluation: every task on both trees, an
    answer and a judged score each (with retries)."""
    runs = len(tasks.split("test")) * tasks.repeats * 2 if tasks else replay.MAX_TASKS * 2
    calls = 3 * options.batch_limit + 6 * decide.MAX_GROUPS + 4 * runs
    return BudgetLimits(
        calls=calls,
        tokens=calls * TOKENS_PER_CALL,
        seconds=max(1800.0, calls * SECONDS_PER_CALL),
    )


@dataclass
class _Plan:
    """The edits that survived, the tree's skills as they stand after them, and the rest."""

    working: dict[str, SkillText]
    kept: list[tuple[Edit, SkillText]] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)
    edited: set[str] = field(default_factory=set)
    decisions: list[dict[str, Any]] = field(default_factory=list)


class SkillClaw:
    name = RECIPE.name
    trials = False  # no agent trial: the replay (or the scenario's task set) is the proof
    requires_tasks = RECIPE.needs_tasks  # one truth: the registered row

    def __init__(self, options: SkillClawOptions | None = None) -> None:
        self.options = options or SkillClawOptions()
        self._mark_dir: str | None = None  # the scenario, once a batch was read
        self._read: list[SessionEvidence] = []
        self._held: set[str] = set()  # read, but not consumed: waiting on a judge, deferred

    @classmethod
    def with_options(cls, options: Mapping[str, Any] | None = None) -> SkillClaw:
        return cls(options_from(options))

    def limits(self, tasks: TaskSet | None) -> BudgetLimits | None:
        return limits_for(self.options, tasks)

    def revise(self, ctx: Context, candidate: Candidate, reasons: list[str]) -> list[Candidate]:
        """No redraft: every edit was verified against its evidence already."""
        return []

    def settle(self, ctx: Context, state: str) -> None:
        """Mark the batch consumed once it was (published, pending, rejected); after a
        failure, a stop or an invalid evaluation it is read again next time. The mark is
        re-read here, so a run that settled meanwhile is not overwritten."""
        if self._mark_dir is None or state not in CONSUMED:
            return
        consumed = [s for s in self._read if s.key not in self._held]
        if not consumed:
            return
        store = open_store()
        try:
            Mark.load(store, self._mark_dir, MARK_NAME).advance(consumed)
        except OSError as exc:
            raise StateError(f"cannot write the skillclaw mark: {exc.strerror}") from exc
        finally:
            store.close()

    # ------------------------------------------------------------ propose

    def propose(self, ctx: Context) -> list[Candidate]:
        scenarios.get(ctx.scenario)  # an unknown scenario fails here, before any read
        store = open_store()
        try:
            sessions = collect(store, ctx.scenario)
            new = Mark.load(store, ctx.scenario, MARK_NAME).new(sessions)
        finally:
            store.close()
        batch = new[: self.options.batch_limit]
        self._mark_dir, self._read = ctx.scenario, batch
        notes: dict[str, Any] = {
            "sessions": [s.key for s in batch],
            "receipts": {s.key: s.receipts for s in batch},
            "seen": len(sessions),
            "later": len(new) - len(batch),
            "batch_limit": self.options.batch_limit,
            "threshold": self.options.threshold,
        }
        ctx.notes["skillclaw"] = notes
        if not batch:
            ctx.nothing_new = True
            return []
        least = sign_test_minimum()  # replay tasks the gate needs to ever publish
        if ctx.held_out is None and len(batch) < least:
            more = f" (raise batch_limit to at least {least})" if notes["later"] else ""
            return self._hold(
                ctx,
                f"{len(batch)} new session(s){more}: the replay's sign test needs at least "
                f"{least} tasks to publish anything",
            )
        ctx.progress(f"skillclaw: scoring {len(batch)} new session(s)", 0.1)
        scored = signals.score_all(ctx.model, batch)
        by_label = {s.label: s for s in scored} | {s.key: s for s in scored}
        notes.update(
            scores={s.key: {"score": s.score, "source": s.source} for s in scored},
            reported=sum(s.source == "reported" for s in scored),
            implicit=sum(s.source == "implicit" for s in scored),
            judged=sum(s.source == "judged" for s in scored),
            waiting=[s.key for s in scored if s.source == "waiting"],
        )
        replayable = replay.replay_tasks(scored, [])
        count = len(replayable.tasks) if replayable is not None else 0
        if ctx.held_out is None and count < least:
            return self._hold(
                ctx,
                f"{count} of {len(batch)} new session(s) can be replayed (a score and a request "
                f"that may be shown): the replay's sign test needs at least {least} tasks to "
                "publish anything",
            )
        winnable = replay.winnable(replayable)  # 0: all went well, nothing to hold for
        if ctx.held_out is None and 0 < winnable < least:
            return self._hold(
                ctx,
                f"{winnable} of {count} replayable session(s) were not accepted: a replayed "
                "request the person accepted can only tie, and the sign test needs at least "
                f"{least} wins to publish anything",
            )
        ctx.progress("skillclaw: rules from what the person said", 0.12)
        learned = self._lines(ctx, scored)
        covered = {key for line in learned for key in line.sessions}
        skills = skills_of(ctx.incumbent)
        groups = decide.groups([s for s in scored if s.key not in covered], set(skills))
        went_well = {s.key for s in scored if s.score is not None and s.score >= 1.0}
        grouped = {s.key for g in groups for s in g.sessions} | covered | went_well
        waiting = notes["waiting"]
        deferred = [s.key for s in scored if s.score is not None and s.key not in grouped]
        self._held = set(waiting) | set(deferred)
        notes["deferred"] = deferred
        plan = _Plan(dict(skills))
        for number, group in enumerate(groups):
            done = 0.15 + 0.15 * number / len(groups)
            ctx.progress(f"skillclaw: deciding for {group.name}", done)
            self._decide(ctx, group, skills, plan, by_label)
        rule_files = rules.apply(ctx.incumbent, learned)
        notes.update(
            groups=plan.decisions,
            edits=[_edit_json(edit, after, by_label) for edit, after in plan.kept],
            dropped=plan.dropped,
            lines=[_line_json(line) for line in learned],
        )
        if not plan.kept and not rule_files:
            # every session went well: consumed, and the run ends unchanged, not rejected
            ctx.nothing_new = all(s.key in went_well for s in scored if s.score is not None)
            return []
        files = dict(ctx.incumbent) | rule_files
        for name in sorted(plan.edited):
            files[plan.working[name].path] = plan.working[name].render()
        cited = list(dict.fromkeys(k for edit, _ in plan.kept for k in edit.sessions))
        cited = list(dict.fromkeys([k for line in learned for k in line.sessions] + cited))
        tasks = replay.replay_tasks(scored, cited)
        notes["replay"] = (tasks.source or {}).get("sessions") if tasks is not None else None
        parts = [f"{len(plan.kept)} skill edit(s)"] if plan.kept else []
        if learned:
            parts.append(f"{len(learned)} line(s) from what the person said")
        return [
            Candidate(
                files=files,
                reason=f"SkillClaw: {' and '.join(parts)} from {len(cited)} session(s)",
                changes=[_line_change(line) for line in learned]
                + [_change(edit, after) for edit, after in plan.kept],
                evidence={"skillclaw": notes},
                tasks=tasks,
            )
        ]

    def _lines(self, ctx: Context, scored: list[signals.Scored]) -> list[rules.Learned]:
        """Each distinct complaint on a failed answer as one rule or fact (or nothing)."""
        found = rules.complaints(scored)
        learned = []
        for number, complaint in enumerate(found):
            ctx.progress(f"skillclaw: complaint {number + 1} of {len(found)}", 0.12)
            line = rules.learn(ctx.model, complaint)
            if line is not None:
                learned.append(line)
        return learned

    def _hold(self, ctx: Context, why: str) -> list[Candidate]:
        """No candidate, and nothing consumed: the gate could not publish from so few, so
        the batch waits for more sessions (the job ends ``unchanged``)."""
        self._read = []
        ctx.held_back = f"{why}; kept for the next run"
        ctx.notes["skillclaw"]["held_back"] = ctx.held_back
        return []

    def _decide(
        self,
        ctx: Context,
        group: decide.Group,
        skills: dict[str, SkillText],
        plan: _Plan,
        by_label: dict[str, signals.Scored],
    ) -> None:
        """One group's decision, resolved, checked and — when it survives — applied."""
        current = skills.get(group.skill) if group.skill else None
        decision = decide.decide(ctx.model, group, current, sorted(skills))
        record: dict[str, Any] = {"skill": group.name, "sessions": len(group.sessions)}
        plan.decisions.append(record)
        if decision is None:
            record["action"] = "none (no session could be shown)"
            return
        record["action"] = decision.action
        edit = decide.edit_of(decision, group, by_label)
        if edit is None:
            return
        before, after, problem = _resolve(edit, plan)
        if after is None:
            why = [problem or "nothing to apply"]
        else:
            why = verify.problems(edit, before, after)
        if not why and after is not None:
            cited = [by_label[key] for key in edit.sessions]
            refused = verify.verifier(ctx.model, edit, before, after, cited, self.options.threshold)
            why = [refused] if refused else []
        if why or after is None:
            plan.dropped.append({"edit": edit.brief(), "why": "; ".join(why)})
            return
        plan.working[after.name] = after
        plan.edited.add(after.name)
        plan.kept.append((edit, after))


def _find(working: dict[str, SkillText], name: str) -> SkillText | None:
    return next((s for s in working.values() if same_name(s.name, name)), None)


def _resolve(edit: Edit, plan: _Plan) -> tuple[SkillText | None, SkillText | None, str | None]:
    """(the skill before, after, a problem): a create onto an existing name — or a second
    edit of a skill this run already changed — is merged (merge.py)."""
    target = _find(plan.working, edit.skill) if edit.skill else None
    if edit.kind == "create_skill":
        name = normal_name(edit.skill)
        if not name:
            return None, None, "a new skill needs a name"
        if target is None:
            return None, SkillText(name, edit.description, edit.body), None
    elif target is None:
        return None, None, f"{edit.kind} names no skill of the tree"
    assert target is not None
    if edit.kind == "optimize_description":
        return target, target.with_description(edit.description), None
    if edit.kind == "create_skill" or target.name in plan.edited:
        merged = merge_bodies(target.body, edit.body)
        edit.merge = {"into": target.name, "used": merged.used, "appended": merged.appended}
        return target, target.with_body(merged.body), None
    return target, target.with_body(edit.body), None


def _edit_json(edit: Edit, after: SkillText, by_label: dict[str, signals.Scored]) -> dict[str, Any]:
    receipts = [r for key in edit.sessions for r in by_label[key].session.receipts]
    out = {
        **edit.brief(),
        "skill": after.name,
        "path": after.path,
        "receipts": list(dict.fromkeys(receipts)),
        "verifier": edit.verifier,
    }
    if edit.merge is not None:
        out["merge"] = edit.merge
    return out


def _line_json(line: rules.Learned) -> dict[str, Any]:
    return {
        "kind": line.kind,
        "text": line.text,
        "complaint": line.complaint,
        "reports": line.reports,
        "sessions": line.sessions,
        "made_by": line.made_by,
        "merged": line.merged,
    }


def _line_change(line: rules.Learned) -> Change:
    path = rules.RULES_PATH if line.kind == "rule" else rules.FACTS_PATH
    n = len(line.reports)
    verb = "merged into" if line.merged else "added to"
    summary = f"{line.kind} {verb} {path}: {line.text[:120]} (from {n} report{'s' * (n != 1)})"
    return Change("rule", path.split("/")[-1].removesuffix(".md"), path, line.complaint, summary)


_SUMMARY = {
    "improve_skill": "improved skill {name}",
    "optimize_description": "new description for skill {name}",
    "create_skill": "added skill {name}",
}


def _change(edit: Edit, after: SkillText) -> Change:
    if edit.merge is not None:
        summary = f"merged a new skill into {after.name}"
    else:
        summary = _SUMMARY[edit.kind].format(name=after.name)
    n = len(edit.sessions)
    summary += f" (from {n} session{'s' if n != 1 else ''})"
    why = edit.why or f"feedback in {n} session(s)"
    return Change("skill", after.name, after.path, why, summary)

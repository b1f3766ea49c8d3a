"""Replay tasks: the batch's own requests, asked again of both trees and judged against
what the person said.

Each task is a session's first request (``runner: direct``: one model call with the
tree as the system prompt), scored by a ``judge`` rubric built from the session's
feedback (the incumbent's side is the person's own reported score of the served
release's recorded answer, when the session was served by the incumbent), and by a
lenient measure that vetoes a reply that does no work (fewer than three
words). The sessions an edit cites come first. The gate uses these only when the
scenario has no task set of its own.
"""

from __future__ import annotations

from recipes.skillclaw.guard import holds_credential
from recipes.skillclaw.signals import Scored
from recipes.tasks import Task, TaskSet
from recipes.tasks.model import Scorer, Served

MAX_TASKS = 12
# The lenient measure, the gate's veto: a reply of at least three words. An empty answer,
# or one cut to a bare token, must never win on style alone.
DOES_WORK = r"\w+\W+\w+\W+\w+"
PROMPT_CHARS = 2000
FEEDBACK_CHARS = 400


def rubric(item: Scored) -> str:
    """What a good answer does, in the person's own words where there are some."""
    said = "; ".join(" ".join(f.split())[:FEEDBACK_CHARS] for f in item.feedback[:3])
    base = (
        "A good answer does what the request asks, correctly and completely, and says what it did."
    )
    if not said:
        return base
    return (
        f"{base} On an earlier answer to this request the person said: {said}. Score 1 "
        "when this answer avoids what they complained about and still answers the request; "
        "score 0 when it repeats the problem or leaves the request unanswered."
    )


def _served(item: Scored) -> Served | None:
    """The served release's answer and the person's reported score of it, when both are
    known: the gate then uses the person's verdict for the incumbent's side."""
    release, answer = item.session.release, item.answered()
    if item.source != "reported" or item.score is None or release is None or not answer:
        return None
    if holds_credential(answer):
        return None
    return Served(release=release, answer=answer[:20_000], score=item.score)


def answer_tokens(replayed: list[Scored]) -> int:
    """Room for an answer as long as the longest recorded one (about 3 characters a token,
    plus a margin), at most 512: a replay asks what the person asked, as they asked it,
    and a reply the person's own client cut short is not given more room here."""
    longest = max((len(s.answered()) for s in replayed), default=0)
    return max(64, min(512, longest // 3 + 32))


def winnable(tasks: TaskSet | None) -> int:
    """Replay tasks the candidate could win: all but those whose incumbent side is an
    answer the person accepted (a score of 1 can only be tied)."""
    if tasks is None:
        return 0
    return sum(1 for t in tasks.tasks if t.served is None or t.served.score < 1.0)


def replay_tasks(scored: list[Scored], cited_first: list[str]) -> TaskSet | None:
    """Up to ``MAX_TASKS`` replay tasks (split test), or None when no session has a
    request that may be shown."""
    order = {key: i for i, key in enumerate(cited_first)}
    ranked = sorted(
        (s for s in scored if s.score is not None),
        key=lambda s: (order.get(s.key, len(order)), int(s.label[1:])),
    )
    tasks: list[Task] = []
    sources: dict[str, str] = {}
    for item in ranked:
        prompt = item.asked().strip()[:PROMPT_CHARS]
        judged_by = rubric(item)
        if not prompt or holds_credential(prompt, judged_by):
            continue
        task_id = f"replay-{item.label.lower()}"
        tasks.append(
            Task(
                id=task_id,
                prompt=prompt,
                judge=judged_by,
                split="test",
                lenient=Scorer(regex=DOES_WORK),
                served=_served(item),
            )
        )
        sources[task_id] = item.key
        if len(tasks) == MAX_TASKS:
            break
    if not tasks:
        return None
    return TaskSet(
        answer_tokens=answer_tokens([s for s in ranked if s.key in sources.values()]),
        name="skillclaw replay",
        source={"recipe": "skillclaw", "sessions": sources},
        runner="direct",
        repeats=1,
        tasks=tasks,
    )

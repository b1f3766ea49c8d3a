"""Replay tasks: the batch's own requests, asked again of both trees and judged against
what the person said.

Each task is a session's first request (``runner: direct``: one model call with the
tree as the system prompt), scored by a ``judge`` rubric built from the session's
feedback. The sessions an edit cites come first. The gate uses these only when the
scenario has no task set of its own.
"""

from __future__ import annotations

from recipes.skillclaw.guard import holds_credential
from recipes.skillclaw.signals import Scored
from recipes.tasks import Task, TaskSet

MAX_TASKS = 12
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
        f"{base} On an earlier answer to this request the person said: {said}. Score an "
        "answer higher when it avoids what they complained about."
    )


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
        tasks.append(Task(id=task_id, prompt=prompt, judge=judged_by, split="test"))
        sources[task_id] = item.key
        if len(tasks) == MAX_TASKS:
            break
    if not tasks:
        return None
    return TaskSet(
        name="skillclaw replay",
        source={"recipe": "skillclaw", "sessions": sources},
        runner="direct",
        repeats=1,
        tasks=tasks,
    )

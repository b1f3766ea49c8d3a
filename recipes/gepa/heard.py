"""What people said, for GEPA: the complaint behind a task, and the accepted sessions.

A small model improves an instruction best when it reads what the user actually said
("The user said: …"), not only a scorer's verdict. A task's complaint comes from, first
to last: the task's own ``feedback`` text; a judge rubric built from a report (SkillClaw's
replay tasks quote "the person said: …"); a report with text on a recorded session that
asked the same prompt. Accepted sessions (a reported score of 1) become demonstrations
(``recipes.demos``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from recipes.tasks import Task
from reef_cli.core.evidence import WITHHELD, SessionEvidence

# the words ``recipes.skillclaw.replay.rubric`` puts around the person's feedback
_SAID = re.compile(r"the person said: (.+?)\. Score ", re.DOTALL)
MAX_COMPLAINT = 300


def normal(prompt: str) -> str:
    """A prompt as a key: case and spacing do not make another prompt."""
    return " ".join(prompt.split()).lower()


def _first_request(session: SessionEvidence) -> str:
    return next(
        (
            t.text
            for t in session.turns
            if t.role == "user" and t.text.strip() and t.text != WITHHELD
        ),
        "",
    )


@dataclass
class Heard:
    """Complaints by prompt (``normal``) and the accepted sessions of one scenario."""

    complaints: dict[str, str] = field(default_factory=dict)
    accepted: list[SessionEvidence] = field(default_factory=list)

    @classmethod
    def of(cls, sessions: list[SessionEvidence]) -> Heard:
        """From a scenario's sessions (oldest first): the newest complaint per prompt wins."""
        heard = cls()
        for session in sessions:
            asked = _first_request(session)
            said = [
                r.text
                for r in session.reports
                if r.text and r.text != WITHHELD and (r.score is None or r.score < 1)
            ]
            if asked and said:
                heard.complaints[normal(asked)] = said[-1]
            score = session.score
            if score is not None and score >= 1.0:
                heard.accepted.append(session)
        return heard

    def complaint(self, task: Task) -> str | None:
        return complaint_of(task, self.complaints)


def complaint_of(task: Task, complaints: Mapping[str, str] | None = None) -> str | None:
    """What a person said about an answer to ``task`` (None: nobody said anything)."""
    said: str | None = task.feedback
    if not said and task.judge:
        found = _SAID.search(task.judge)
        said = found.group(1) if found else None
    if not said and complaints:
        said = complaints.get(normal(task.prompt))
    if not said:
        return None
    flat = " ".join(said.split())
    return flat if len(flat) <= MAX_COMPLAINT else flat[: MAX_COMPLAINT - 1] + "…"


def read(scenario: str) -> Heard:
    """The scenario's recorded sessions, read once per search."""
    from reef_cli.core.evidence import collect
    from reef_cli.core.store import open_store

    store = open_store()
    try:
        return Heard.of(collect(store, scenario))
    finally:
        store.close()

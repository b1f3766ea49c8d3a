"""How well each session went, 0..1: its reported score, else an implicit signal read
from its turns, else one judge call.

The implicit signal follows OpenClaw-RL's next-state idea: what the person says after an
answer grades it. A later user turn that moves on is +1 for the assistant turn before it;
one that corrects or complains ("no", "that's wrong", "still failing", "you forgot" …)
is -1. The mean over a session's answer/reply pairs maps to 0..1. A session whose last
answer got no reply has nothing to read, so the model judges it; a judge outage leaves
the session *waiting* (not consumed: the next run judges it again).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import pairwise

from recipes.quality import Judgement
from recipes.skillclaw.guard import clean
from reef_cli.core.errors import ModelError
from reef_cli.core.evidence import WITHHELD, SessionEvidence, Turn
from reef_cli.core.llm import ModelClient

SHOWN = 600  # characters of a turn a prompt quotes

_CORRECTION = re.compile(
    r"^\s*(?:no|nope|nah|wrong|incorrect)\b"
    r"|\b(?:that'?s|that is|this is|it'?s|it is|was|is) (?:wrong|incorrect|not (?:right|"
    r"correct|what i))\b"
    r"|\b(?:did ?n[o']?t|does ?n[o']?t|do ?n[o']?t|did not|does not) (?:work|help|compile|"
    r"run|pass|fix)\b"
    r"|\bnot working\b|\bstill (?:fail|failing|fails|broken|wrong|crash|crashing|the same|"
    r"not|does ?n'?t|did ?n'?t|have|get|see)\b"
    r"|\byou (?:forgot|missed|ignored|broke|did ?n'?t|skipped|deleted|removed)\b"
    r"|\b(?:try again|undo (?:that|it|this)|revert (?:that|it|this)|you'?re wrong)\b"
    r"|\bi (?:said|told you|asked (?:you )?(?:to|for))\b",
    re.I,
)


def is_correction(text: str) -> bool:
    """Whether a user turn corrects or complains about the answer before it."""
    return bool(_CORRECTION.search(text))


@dataclass
class Scored:
    """A session of this batch with its score (None: nothing could be read or judged)."""

    session: SessionEvidence
    label: str  # S1, S2 … : how prompts and the model name it
    score: float | None = None
    source: str = "none"  # reported | implicit | judged | waiting | none
    feedback: list[str] = field(default_factory=list)  # what the person said about it

    @property
    def key(self) -> str:
        return self.session.key

    def asked(self) -> str:
        """The person's first request that is not withheld ("" when there is none)."""
        return next((t.text for t in self.session.turns if _readable(t, "user")), "")

    def answered(self) -> str:
        """The agent's last answer that is not withheld."""
        return next((t.text for t in reversed(self.session.turns) if _readable(t, "assistant")), "")


def _readable(turn: Turn, role: str) -> bool:
    return turn.role == role and turn.text != WITHHELD and bool(turn.text.strip())


def implicit(turns: list[Turn]) -> tuple[float, list[str]] | None:
    """(score 0..1, the correcting turns) from each assistant turn followed by a user
    turn; None when no answer got a reply (or every reply was withheld)."""
    signals: list[int] = []
    corrections: list[str] = []
    for before, after in pairwise(turns):
        if before.role != "assistant" or after.role != "user" or after.text == WITHHELD:
            continue
        if is_correction(after.text):
            signals.append(-1)
            corrections.append(after.text)
        else:
            signals.append(1)
    if not signals:
        return None
    return (sum(signals) / len(signals) + 1) / 2, corrections


JUDGE_SYSTEM = (
    "You grade how well a coding agent served a developer in one session, from 0 to 1. "
    "1 = the request was done fully and correctly; 0.5 = partly done or with mistakes; "
    "0 = not done, wrong, or the developer's feedback says it failed. Answer with JSON "
    'only: {"score": number from 0 to 1, "reason": one short sentence}.'
)
_EXAMPLE = (
    "Request: add a test for parse_date\nAnswer: I added test_parse_date_handles_iso in "
    "tests/test_dates.py and ran it: it passes.\nFeedback: (none)",
    Judgement(score=0.9, reason="The test was written and run, as asked."),
)


def judge_messages(scored: Scored) -> list[dict[str, str]]:
    feedback = "; ".join(f[:300] for f in scored.feedback) or "(none)"
    prompt = (
        f"Request: {scored.asked()[:SHOWN]}\nAnswer: {scored.answered()[:SHOWN]}\n"
        f"Feedback: {feedback}"
    )
    return [
        {"role": "system", "content": JUDGE_SYSTEM},
        {"role": "user", "content": _EXAMPLE[0]},
        {"role": "assistant", "content": _EXAMPLE[1].model_dump_json()},
        {"role": "user", "content": prompt},
    ]


def reported(session: SessionEvidence) -> float | None:
    """The mean reported score, on 0..1 (scores outside it are clamped)."""
    score = session.score
    return None if score is None else min(1.0, max(0.0, score))


def score_all(model: ModelClient, sessions: list[SessionEvidence]) -> list[Scored]:
    """Every session scored (labels S1, S2 … in batch order). A judge outage marks the
    session ``waiting``; budget errors propagate (the job stops)."""
    out: list[Scored] = []
    for number, session in enumerate(sessions, 1):
        scored = Scored(session, f"S{number}")
        scored.feedback = [r.text for r in session.reports if r.text and r.text != WITHHELD]
        out.append(scored)
        given = reported(session)
        if given is not None:
            scored.score, scored.source = given, "reported"
            continue
        signal = implicit(session.turns)
        if signal is not None:
            scored.score, scored.source = signal[0], "implicit"
            scored.feedback += signal[1]
            continue
        if not scored.asked() or not scored.answered():
            continue  # nothing to judge (no request or no answer that may be shown)
        messages = judge_messages(scored)
        if not clean(messages):
            continue  # a credential got past the turns' check: never sent
        try:
            verdict = model.structured(messages, Judgement, max_tokens=120, temperature=0)
        except ModelError:
            scored.source = "waiting"
            continue
        scored.score, scored.source = verdict.score, "judged"
        scored.feedback.append(f"judge: {verdict.reason}")
    return out

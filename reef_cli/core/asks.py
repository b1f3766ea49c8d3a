"""Checking a person's ask before any model sees it: size, policy, ambiguity."""

from __future__ import annotations

import re

from reef_cli.core import policy
from reef_cli.core.errors import AskRefused

__all__ = ["MAX_ASK_CHARS", "AskRefused", "check_ask", "clarifying_questions"]

MAX_ASK_CHARS = 2000


def check_ask(ask: str) -> str:
    """The ask, whitespace-normalised; ``AskRefused`` with the reason otherwise."""
    text = " ".join(ask.split())
    if not text:
        raise AskRefused("the ask is empty", 'say what should change, e.g. reef evolve "…"')
    if len(text) > MAX_ASK_CHARS:
        raise AskRefused(
            f"the ask is {len(text)} characters; at most {MAX_ASK_CHARS} fit in one change",
            "say it in a sentence or two; put long material in a skill file and publish it",
        )
    violations = policy.scan_text(text, "ask")
    if violations:
        raise AskRefused(
            f"the ask was refused: it would make the agent {violations[0].rule.replace('-', ' ')}",
            "Reef does not build harness changes that leak secrets or weaken the sandbox",
        )
    return text


_ACTION = re.compile(
    r"\b(?:always|never|when|whenever|before|after|use|prefer|avoid|write|run|add|keep|make|"
    r"check|ask|reproduce|test|explain|review|follow|do|don't|should|must|please)\b",
    re.IGNORECASE,
)


def clarifying_questions(ask: str) -> list[str]:
    """Up to two questions when an ask is too vague to act on (asked unless --yes)."""
    questions = []
    words = ask.split()
    if len(words) < 4 or not _ACTION.search(ask):
        questions.append("What should the agent do differently? (one sentence, e.g. 'always …')")
    if not re.search(r"\b(?:when|whenever|if|before|after|always|every)\b", ask, re.IGNORECASE):
        questions.append("When should this apply? (e.g. 'when I ask for a bug fix'; empty: always)")
    return questions[:2]

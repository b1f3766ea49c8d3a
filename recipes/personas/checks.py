"""How a persona reads a reply: each check passes or fails, and the first failure's
complaint is what the user says.

Regex kinds run with ``re.MULTILINE`` on the reply as given (``forbid``: no match
anywhere; ``require``: a match somewhere; ``starts_with``: a match at the start of the
first non-empty line; ``last_line``: the last non-empty line matches). ``words`` forbids
whole words, case-insensitively. ``correct: last`` compares the gold answer with the
reply's last number (or its last yes/no word, when the gold answer is one), ``correct:
first`` with its first (a contract that puts the result up front), ``correct: any``
with any of its numbers (the result is stated somewhere, whatever the layout); ``correct:
contains`` finds the gold answer anywhere in the reply, case-insensitively. An empty
reply fails every check: a reply that does no work is never accepted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from recipes.personas.spec import Check

_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")
_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
_WORD = re.compile(r"\b[\w'-]+\b")


@dataclass(frozen=True)
class Verdict:
    """Whether every check passed; the failed checks' kinds and the complaint for the
    first of them (None when the reply passed)."""

    passed: bool
    failed: tuple[str, ...] = ()
    complaint: str | None = None


def words(text: str) -> int:
    return len(_WORD.findall(text))


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _hits(reply: str, gold: str) -> list[bool]:
    """For each of the reply's yes/no words (a yes/no gold answer) or numbers, in order,
    whether it is the gold answer."""
    wanted = gold.strip().lower()
    if wanted in ("yes", "no"):
        return [word.lower() == wanted for word in _YES_NO.findall(reply)]
    target = _number(wanted)
    if target is None:
        return []
    values = (_number(found) for found in _NUMBER.findall(reply))
    return [value is not None and abs(value - target) < 1e-9 for value in values]


def correct(reply: str, gold: str | None, where: str) -> bool:
    """The reply's ``last``, ``first`` or ``any`` number (or yes/no word) is the gold
    answer."""
    hits = _hits(reply, gold) if gold is not None else []
    if not hits:
        return False
    return any(hits) if where == "any" else hits[0 if where == "first" else -1]


def passes(check: Check, reply: str, gold: str | None) -> bool:
    """Whether ``reply`` passes ``check`` (``gold``: the prompt's answer, if any)."""
    if not reply.strip():
        return False
    kind = check.kind
    if kind == "forbid":
        return re.search(check.forbid or "", reply, re.MULTILINE) is None
    if kind == "require":
        return re.search(check.require or "", reply, re.MULTILINE) is not None
    if kind == "starts_with":
        return re.match(check.starts_with or "", _lines(reply)[0]) is not None
    if kind == "last_line":
        return re.search(check.last_line or "", _lines(reply)[-1]) is not None
    if kind == "max_words":
        return words(reply) <= (check.max_words or 0)
    if kind == "min_words":
        return words(reply) >= (check.min_words or 0)
    if kind == "words":
        banned = {w.lower() for w in check.words or []}
        return not any(w.lower() in banned for w in _WORD.findall(reply))
    if check.correct == "contains":
        return gold is not None and gold.strip().lower() in reply.lower()
    return correct(reply, gold, check.correct or "last")


def judge(checks: list[Check], reply: str, gold: str | None) -> Verdict:
    """Every check in order; the complaint is the first failed check's."""
    failed = [c for c in checks if not passes(c, reply, gold)]
    if not failed:
        return Verdict(True)
    return Verdict(False, tuple(c.kind for c in failed), failed[0].complaint)

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


def correct_at(reply: str, gold: str | None, which: int = -1) -> bool:
    """The reply's last (``which`` -1) or first (0) number equals the gold number; for a
    yes/no gold answer, that yes/no word does."""
    if gold is None:
        return False
    wanted = gold.strip().lower()
    if wanted in ("yes", "no"):
        found = _YES_NO.findall(reply)
        return bool(found) and found[which].lower() == wanted
    target = _number(wanted)
    found = _NUMBER.findall(reply)
    if target is None or not found:
        return False
    have = _number(found[which])
    return have is not None and abs(have - target) < 1e-9


def correct_anywhere(reply: str, gold: str | None) -> bool:
    """One of the reply's numbers (or yes/no words) equals the gold answer."""
    if gold is None:
        return False
    wanted = gold.strip().lower()
    if wanted in ("yes", "no"):
        return any(word.lower() == wanted for word in _YES_NO.findall(reply))
    target = _number(wanted)
    numbers = (_number(found) for found in _NUMBER.findall(reply))
    return target is not None and any(n is not None and abs(n - target) < 1e-9 for n in numbers)


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
    if check.correct == "any":
        return correct_anywhere(reply, gold)
    return correct_at(reply, gold, 0 if check.correct == "first" else -1)


def judge(checks: list[Check], reply: str, gold: str | None) -> Verdict:
    """Every check in order; the complaint is the first failed check's."""
    failed = [c for c in checks if not passes(c, reply, gold)]
    if not failed:
        return Verdict(True)
    return Verdict(False, tuple(c.kind for c in failed), failed[0].complaint)

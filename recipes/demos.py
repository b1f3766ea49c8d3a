"""Accepted answers as demonstrations: DSPy's BootstrapFewShot idea for a harness tree.

A session the user accepted (a reported score of 1) holds a request and an answer that
did what they wanted; shown as a few-shot example, it carries their conventions to the
next request better than a rule a small model half follows. Which examples help is an
empirical question, so they are chosen on validation: a few deterministic (seeded)
subsets of up to ``k`` examples are each added to the tree as one skill
(``skills/demonstrations/SKILL.md``) and scored by the caller's callback; the best
subset wins, ties going to fewer, then shorter, examples — and the tree without
demonstrations is a contestant too, so a subset must *beat* it to be chosen.

A session whose text held a credential (a withheld turn, or a hit of the secret scan on
what would be shown) is never used. GEPA uses ``choose_demos`` for a second seed
candidate; SkillClaw may use it the same way.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reef_cli.core.evidence import WITHHELD, SessionEvidence
from reef_cli.core.json_shape import field_dict
from reef_cli.core.llm import cut_at_word

SKILL_NAME = "demonstrations"
SKILL_PATH = f"skills/{SKILL_NAME}/SKILL.md"
REQUEST_CHARS = 500  # a request is cut here (at a word)
ANSWER_CHARS = 700  # an answer too: an example shows the form, not every line
POOL = 12  # the newest accepted sessions considered
K = 3  # examples in the skill, at most
TRIALS = 4  # subsets tried (each costs one scoring of the tree)

HEAD = (
    "---\n"
    f"name: {SKILL_NAME}\n"
    "description: Answers the user accepted earlier; answer new requests the same way.\n"
    "---\n\n"
    "Answers the user accepted. Give new requests answers of the same form and style.\n"
)

ScoreTree = Callable[[dict[str, str]], float]  # files to add to the tree -> validation score


@dataclass(frozen=True)
class Demo:
    key: str  # the session it came from
    request: str
    answer: str


@dataclass
class Selection:
    """What was tried and what won (``files`` is None when no subset beat none)."""

    files: dict[str, str] | None
    pool: list[str]  # session keys considered, in order
    baseline: float | None = None  # the tree without demonstrations
    tried: list[dict[str, Any]] = field(default_factory=list)  # {sessions, score}
    chosen: list[str] = field(default_factory=list)
    score: float | None = None

    def to_json(self) -> dict[str, Any]:
        return field_dict(self, leave_out=("files",))


def _readable(text: str) -> bool:
    return bool(text.strip()) and text != WITHHELD


def _session_of(item: Any) -> SessionEvidence:
    """A ``SessionEvidence``, or anything that carries one as ``.session`` (SkillClaw's
    ``Scored``)."""
    return item.session if hasattr(item, "session") else item


def demos_of(accepted: Sequence[Any]) -> list[Demo]:
    """The usable demonstrations, newest first: a reported score of 1, a readable request
    and answer, no credential anywhere in the session's text, each request once."""
    from recipes.skillclaw.guard import holds_credential  # run time: no import circle

    out: list[Demo] = []
    seen: set[str] = set()
    for item in reversed(list(accepted)):
        session = _session_of(item)
        score = session.score
        if score is None or score < 1.0 or session.withheld:
            continue
        texts = [t.text for t in session.turns] + [r.text for r in session.reports]
        if WITHHELD in texts or holds_credential(*texts):
            continue
        request = next(
            (t.text for t in session.turns if t.role == "user" and _readable(t.text)), ""
        )
        answer = next(
            (
                t.text
                for t in reversed(session.turns)
                if t.role == "assistant" and _readable(t.text)
            ),
            "",
        )
        if not request or not answer:
            continue
        request = cut_at_word(request.strip(), REQUEST_CHARS)
        answer = cut_at_word(answer.strip(), ANSWER_CHARS)
        key = " ".join(request.split()).lower()
        if key in seen or holds_credential(request, answer):
            continue
        seen.add(key)
        out.append(Demo(session.key, request, answer))
        if len(out) == POOL:
            break
    return out


def skill_files(demos: Sequence[Demo]) -> dict[str, str]:
    """The demonstrations skill holding ``demos`` ({} for none)."""
    if not demos:
        return {}
    parts = [HEAD]
    for n, demo in enumerate(demos, 1):
        parts.append(f"\n### Example {n}\n\nRequest:\n{demo.request}\n\nAnswer:\n{demo.answer}\n")
    return {SKILL_PATH: "".join(parts)}


def subsets(size: int, k: int, seed: int, trials: int) -> list[tuple[int, ...]]:
    """Up to ``trials`` distinct subsets of ``range(size)`` of 1..k items, the same for the
    same arguments: the first is the newest ``k``, then seeded draws of growing size."""
    if size == 0 or k < 1 or trials < 1:
        return []
    rng = random.Random(seed)
    top = min(k, size)
    out: list[tuple[int, ...]] = [tuple(range(top))]
    for attempt in range(trials * 10):
        if len(out) >= trials:
            break
        n = 1 + attempt % top
        pick = tuple(sorted(rng.sample(range(size), n)))
        if pick not in out:
            out.append(pick)
    return out


def select(
    accepted: Sequence[Any],
    score_tree: ScoreTree,
    *,
    k: int = K,
    seed: int = 0,
    trials: int = TRIALS,
) -> Selection:
    """Score the tree without demonstrations, then each subset; keep the best (ties:
    fewer examples, then fewer characters, then the earlier subset)."""
    pool = demos_of(accepted)
    selection = Selection(None, [d.key for d in pool])
    if not pool:
        return selection
    baseline = float(score_tree({}))
    selection.baseline = round(baseline, 4)
    best: tuple[float, int, int] = (-baseline, 0, 0)
    for subset in subsets(len(pool), k, seed, trials):
        chosen = [pool[i] for i in subset]
        files = skill_files(chosen)
        score = float(score_tree(files))
        selection.tried.append({"sessions": [d.key for d in chosen], "score": round(score, 4)})
        rank = (-score, len(chosen), len(files[SKILL_PATH]))
        if rank < best:
            best = rank
            selection.files = files
            selection.chosen = [d.key for d in chosen]
            selection.score = round(score, 4)
    return selection


def choose_demos(
    accepted: Sequence[Any],
    score_tree: ScoreTree,
    *,
    k: int = K,
    seed: int = 0,
    trials: int = TRIALS,
) -> dict[str, str] | None:
    """Files to add to a tree (the demonstrations skill), or None when there is no usable
    accepted session or no subset scores better than the tree without one.
    ``score_tree(files)`` scores the tree with ``files`` added on validation tasks."""
    return select(accepted, score_tree, k=k, seed=seed, trials=trials).files

"""Scoring one answer to one task: the task's scorer, its lenient measure, and feedback.

``grade`` is the one place an answer becomes a ``TaskRun``. ``None`` is "no score" —
the model or the sandbox could not do the work — which the evaluation treats as an
outage (never a win, never a zero that looks like a loss). The feedback is a short,
plain sentence GEPA's reflection reads: what was expected, what came back, what failed.
Code scorers (``python``, ``command``) run only in the sandbox (``recipes.tasks.checks``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from recipes.quality import Judgement
from recipes.tasks.model import Scorer, Task
from reef_cli.core.errors import ExtraMissing, ModelError
from reef_cli.core.llm import ModelClient

SHOWN = 200  # characters of an answer quoted back in feedback


@dataclass
class TaskRun:
    """One run of one task on one tree: the score (None: an outage), the answer, why."""

    score: float | None
    answer: str
    feedback: str
    lenient: float | None = None
    judged: bool = False  # the score came from a model judge, not a program


@dataclass
class Scored:
    score: float | None
    feedback: str


_ANSWER_TAG = re.compile(r"<answer>\s?(.*?)\s?</answer>", re.DOTALL)
_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")


def answer_part(answer: str) -> str:
    """The last ``<answer>…</answer>`` block if the answer has one, else all of it."""
    found = _ANSWER_TAG.findall(answer)
    return (found[-1] if found else answer).strip()


def last_number(text: str) -> float | None:
    found = _NUMBER.findall(text)
    if not found:
        return None
    try:
        return float(found[-1].replace(",", ""))
    except ValueError:
        return None


def score_answer(answer: str, task: Task) -> float:
    """The ``expect`` score: the share of expected substrings found, case-insensitively."""
    text = answer.lower()
    wanted = task.expect or []
    return sum(1 for want in wanted if want.lower() in text) / len(wanted) if wanted else 0.0


def _quote(answer: str) -> str:
    text = " ".join(answer.split())
    return repr(text[:SHOWN] + ("…" if len(text) > SHOWN else ""))


def score(scorer: Scorer, answer: str, task: Task, *, judge: ModelClient | None = None) -> Scored:
    """``scorer``'s score for ``answer``, with a feedback sentence."""
    return SCORING[scorer.kind](scorer, answer, task, judge)


def _expect(scorer: Scorer, answer: str, _task: Task, _judge: ModelClient | None) -> Scored:
    wanted = scorer.expect or []
    text = answer.lower()
    missing = [w for w in wanted if w.lower() not in text]
    value = (len(wanted) - len(missing)) / len(wanted)
    why = f"missing {missing}" if missing else "every expected phrase is there"
    return Scored(value, f"expected phrases {wanted}; {why}; answer {_quote(answer)}")


def _exact(scorer: Scorer, answer: str, _task: Task, _judge: ModelClient | None) -> Scored:
    text = scorer.exact or ""
    ok = answer_part(answer) == text.strip()
    verdict = "correct" if ok else f"answer {_quote(answer)}"
    return Scored(float(ok), f"expected exactly {text!r}; {verdict}")


def _regex(scorer: Scorer, answer: str, _task: Task, _judge: ModelClient | None) -> Scored:
    ok = re.search(scorer.regex or "", answer) is not None
    return Scored(float(ok), f"expected a match of /{scorer.regex}/; answer {_quote(answer)}")


def _contains(scorer: Scorer, answer: str, _task: Task, _judge: ModelClient | None) -> Scored:
    ok = (scorer.contains or "") in answer
    return Scored(float(ok), f"expected {scorer.contains!r} somewhere; answer {_quote(answer)}")


def _last_number(scorer: Scorer, answer: str, _task: Task, _judge: ModelClient | None) -> Scored:
    want = float((scorer.last_number or "0").replace(",", ""))
    have = last_number(answer)
    ok = have is not None and abs(have - want) < 1e-9
    return Scored(
        float(ok), f"expected the last number to be {scorer.last_number}; answer {_quote(answer)}"
    )


def _python(scorer: Scorer, answer: str, task: Task, _judge: ModelClient | None) -> Scored:
    from recipes.tasks import checks  # the sandbox: only for code scorers

    checked = checks.run_python(scorer.python or "", answer, task.files, scorer.timeout_s)
    return Scored(checked.score, checked.feedback)


def _command(scorer: Scorer, answer: str, task: Task, _judge: ModelClient | None) -> Scored:
    from recipes.tasks import checks

    checked = checks.run_command(scorer.command or "", answer, task.files, scorer.timeout_s)
    return Scored(checked.score, checked.feedback)


def _reasoning_gym(scorer: Scorer, answer: str, _task: Task, _judge: ModelClient | None) -> Scored:
    got = _quote(answer)
    ref = scorer.reasoning_gym
    assert ref is not None
    try:
        import reasoning_gym
    except ImportError as exc:
        raise ExtraMissing(
            "this task set is scored by reasoning-gym, which is not installed",
            "pip install 'reef[tasks]'",
        ) from exc
    score_fn = reasoning_gym.get_score_answer_fn(ref.dataset)
    value = float(score_fn(answer, ref.entry))
    oracle = ref.entry.get("answer")
    verdict = "correct" if value >= 1.0 else f"scored {value:.2f}; answer {got}"
    return Scored(value, f"{ref.dataset}: expected {oracle!r}; {verdict}")


JUDGE_SYSTEM = (
    "You grade an assistant's answer to a task against a rubric. Score from 0 (fails the "
    "rubric) to 1 (meets it fully). Answer with JSON only: "
    '{"score": number from 0 to 1, "reason": one short sentence}.'
)


def _judged(scorer: Scorer, answer: str, task: Task, judge: ModelClient | None) -> Scored:
    rubric = scorer.judge or ""
    if judge is None:
        return Scored(None, "a judge scorer needs a judge model, and none was given")
    messages = [
        {"role": "system", "content": JUDGE_SYSTEM},
        {
            "role": "user",
            "content": f"Task:\n{task.prompt[:2000]}\n\nRubric:\n{rubric}\n\n"
            f"Answer:\n{answer[:3000]}",
        },
    ]
    try:
        verdict = judge.structured(messages, Judgement, max_tokens=120, temperature=0.0)
    except ModelError as exc:  # an outage: no score, never a zero
        return Scored(None, f"the judge gave no score: {exc.message}")
    return Scored(verdict.score, f"judge {verdict.score:.2f}: {verdict.reason}")


# Every scorer kind and how it scores. A new scorer is its field on ``Scorer`` (the task
# format, recipes/tasks/model.py) and one row here; a test checks that the two agree.
SCORING: dict[str, Callable[[Scorer, str, Task, ModelClient | None], Scored]] = {
    "expect": _expect,
    "exact": _exact,
    "regex": _regex,
    "contains": _contains,
    "last_number": _last_number,
    "python": _python,
    "command": _command,
    "judge": _judged,
    "reasoning_gym": _reasoning_gym,
}


def grade(task: Task, answer: str | None, *, judge: ModelClient | None = None) -> TaskRun:
    """The run of ``task`` that produced ``answer`` (None: the runner had an outage)."""
    if answer is None:
        return TaskRun(None, "", "no answer: the model or the agent failed")
    main = score(task, answer, task, judge=judge)
    lenient = score(task.lenient, answer, task, judge=judge) if task.lenient else None
    feedback = main.feedback
    if lenient is not None and lenient.score is not None:
        feedback += f" (lenient {task.lenient.kind if task.lenient else ''}: {lenient.score:.2f})"
    return TaskRun(
        main.score,
        answer,
        feedback,
        lenient=lenient.score if lenient else None,
        judged=task.kind == "judge",
    )

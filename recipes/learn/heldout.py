"""The held-out half of `reef bench learn`: each arm (a tree) answers the persona's
held-out prompts, which never went through the proxy, and is scored by the persona's
checks (strict) and its lenient measure; arms are compared pairwise, prompt by prompt.

Arms: ``before`` (the tree served when the sessions began), ``after`` (served when they
ended), and the controls on the same prompts — ``aa`` (``before`` answered a second
time: greedy decoding is deterministic, so anything but 0 is a fault of the apparatus),
``placebo`` (``before`` plus a rule of the same length about something else),
``raw_feedback`` (``before`` plus the complaints the user sent, verbatim) and ``oracle``
(``before`` plus the persona's preference written by hand: the ceiling).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from recipes.personas import Persona, Prompt, judge
from recipes.tasks.runners import render_harness
from reef_cli.core.llm import ModelClient
from reef_cli.core.paired_rule import interval, sign_test_p

PLACEBO_PATH = "rules/placebo.md"
ADDED_PATH = "rules/control.md"
# Rules about something no persona checks: the placebo is cut from these to a length.
PLACEBO_TEXT = (
    "When you name a new file, use lowercase words joined by hyphens. Give times in UTC "
    "and say so. Prefer the standard library to a new dependency when both would do. When "
    "you mention a version of a tool, give the full version number. Keep function names "
    "short and say what the function returns. When a path is relative, say what it is "
    "relative to. Mention the time zone of any date you give. Name configuration keys "
    "exactly as they appear in the file. When you refer to a command, give it in full. "
)

Progress = Callable[[str, int, int], None]  # (arm, done, total)


@dataclass(frozen=True)
class Answer:
    prompt: str
    strict: float
    lenient: float
    words: int
    text: str


def placebo(length: int) -> str:
    """Irrelevant rules, ``length`` characters (at least one sentence)."""
    text = PLACEBO_TEXT * (length // len(PLACEBO_TEXT) + 1)
    cut = text[: max(length, 40)]
    return cut[: cut.rfind(".") + 1] if "." in cut else cut


def added_length(before: dict[str, str], after: dict[str, str]) -> int:
    """How many characters of prompt text ``after`` adds to ``before``."""
    return max(0, len(render_harness(after)) - len(render_harness(before)))


def with_rule(files: dict[str, str], path: str, text: str) -> dict[str, str]:
    return {**files, path: text.strip() + "\n"}


def answer_all(
    model: ModelClient,
    persona: Persona,
    files: dict[str, str],
    prompts: list[Prompt],
    tick: Callable[[], None] = lambda: None,
) -> list[Answer]:
    """Every prompt answered once with ``files`` as the system prompt, greedy; as many
    at once as the model decodes together (``ModelClient.parallelism``)."""
    system = render_harness(files)

    def answer(prompt: Prompt) -> Answer:
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": prompt.text})
        text = model.chat(messages, max_tokens=persona.max_tokens, temperature=0.0).text
        strict = judge(persona.checks, text, prompt.answer).passed
        lenient = judge(persona.lenient, text, prompt.answer).passed if persona.lenient else True
        tick()
        return Answer(prompt.id, float(strict), float(lenient), len(text.split()), text)

    workers = model.parallelism
    if workers > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers, thread_name_prefix="reef-heldout") as pool:
            return list(pool.map(answer, prompts))
    return [answer(prompt) for prompt in prompts]


def compare(before: list[Answer], after: list[Answer], measure: str) -> dict[str, object]:
    """``after`` against ``before`` on one measure: how many answers are word for word the
    same, the means, the mean paired difference with its 95% bootstrap interval, wins /
    losses / ties and the one-sided sign test."""
    a = [getattr(x, measure) for x in before]
    b = [getattr(x, measure) for x in after]
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    wins = sum(d > 0 for d in diffs)
    losses = sum(d < 0 for d in diffs)
    low, high = interval(diffs)
    return {
        "same_answers": sum(x.text == y.text for x, y in zip(before, after, strict=True)),
        "before": round(statistics.fmean(a), 4),
        "after": round(statistics.fmean(b), 4),
        "diff": round(statistics.fmean(diffs), 4),
        "diff_ci": [round(low, 4), round(high, 4)],
        "wins": wins,
        "losses": losses,
        "ties": len(diffs) - wins - losses,
        "sign_p": round(sign_test_p(wins, losses), 5),
    }

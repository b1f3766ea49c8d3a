"""GEPA's reflection step, in a form a small model follows.

GEPA's default reflection prompt is long and abstract; a 1.5B model answered it with
"Certainly! Please provide the inputs…" for eleven iterations and never proposed a text.
This template is short and concrete: the current text, a few tasks with the answer it
got, its score, what the user said about such an answer (a complaint, when a person gave
one: it is the signal a small model acts on best) and the scorer's feedback, and one
instruction — reply with the new text inside one fenced block. One worked example (a
user turn and the fenced reply) comes first, so a small model sees the answer's shape.
The reply's first fenced block is the proposal; with no fence the whole reply is (cut to
a bound). An empty reply, the old text again, the worked example's reply or the prompt
echoed back keeps the old text, so GEPA spends no metric calls on a proposal that never
happened.

Every reflection call goes through ``ModelClient.chat``, so it is charged to the job's
budget like every other model call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reef_cli.core.errors import ReefError
from reef_cli.core.llm import ModelClient, cut_at_word

MAX_TEXT = 4000  # characters of a proposed instruction
MAX_EXAMPLES = 4
REFLECTION_TOKENS = 800
TEMPERATURE = 0.7  # some variety between steps; the task runs themselves are at 0
ASK_LINE = "Reply with only the new instruction text inside one ``` block."

TEMPLATE = """You improve an instruction that an AI assistant is given before each task.

Current instruction ({path}):
```
{current}
```

How the assistant did on some tasks with it:

{examples}

Write a better instruction that fixes what the user and the feedback point out. \
Keep what works. \
It must help with any task like these, so do not copy one task's answer into it.
{ask}"""

EXAMPLE = "Example {n}\nTask: {task}\nAnswer: {answer}\nScore: {score}\n{said}Feedback: {feedback}"
SAID = 'The user said: "{complaint}"\n'

# The worked example: a domain no shipped persona or task set uses, so it teaches the
# reply's shape (a general rule that answers the complaint, in one fence), not a content.
WORKED_CURRENT = "Be helpful."
WORKED_RECORD = {
    "Inputs": "Convert 2.5 hours to minutes.",
    "Generated Outputs": "150",
    "Score": "0.00",
    "User said": "Write the unit too, not a bare number.",
    "Feedback": "expected '150 minutes'",
}
WORKED_TEXT = 'Be helpful. Always write the unit after a number, for example "150 minutes".'


def _short(text: Any, bound: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= bound else flat[: bound - 1] + "…"


def pick_examples(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Up to ``MAX_EXAMPLES`` records, the ones that lost points first (their feedback is
    what the new text must fix), in the minibatch's order otherwise."""
    ordered = sorted(
        enumerate(records), key=lambda pair: (float(pair[1].get("score", 0.0)) >= 1.0, pair[0])
    )
    return [record for _, record in ordered[:MAX_EXAMPLES]]


def _score_text(record: Mapping[str, Any]) -> str:
    given = record.get("Score")
    return str(given) if given is not None else f"{float(record.get('score') or 0.0):.2f}"


def _example(n: int, record: Mapping[str, Any]) -> str:
    complaint = _short(record.get("User said") or "", 300)
    return EXAMPLE.format(
        n=n,
        task=_short(record.get("Inputs", ""), 600),
        answer=_short(record.get("Generated Outputs", ""), 400),
        score=_score_text(record),
        said=SAID.format(complaint=complaint) if complaint else "",
        feedback=_short(record.get("Feedback", ""), 300),
    )


def prompt_for(path: str, current: str, records: Sequence[Mapping[str, Any]]) -> str:
    examples = "\n\n".join(_example(n, r) for n, r in enumerate(pick_examples(records), 1))
    return TEMPLATE.format(path=path, current=current.strip(), examples=examples, ask=ASK_LINE)


def messages_for(
    path: str, current: str, records: Sequence[Mapping[str, Any]]
) -> list[dict[str, str]]:
    """The worked example (a user turn, the fenced reply), then the real prompt."""
    worked = prompt_for("rules/example.md", WORKED_CURRENT, [WORKED_RECORD])
    return [
        {"role": "user", "content": worked},
        {"role": "assistant", "content": f"```\n{WORKED_TEXT}\n```"},
        {"role": "user", "content": prompt_for(path, current, records)},
    ]


def fenced(reply: str) -> str | None:
    """The first fenced block's text (an unclosed fence: the rest of the reply)."""
    start = reply.find("```")
    if start < 0:
        return None
    line_end = reply.find("\n", start)
    if line_end < 0:
        return None
    end = reply.find("```", line_end)
    return reply[line_end + 1 : end if end >= 0 else len(reply)]


def extract(reply: str, current: str) -> str | None:
    """The proposed text in ``reply``, bounded; None when it is unusable (empty, the old
    text, or the prompt echoed back)."""
    block = fenced(reply)
    text = (block if block is not None and block.strip() else reply).strip()
    if text.startswith("```"):  # a one-line fence: ```text```
        text = text.strip("`").strip()
    if len(text) > MAX_TEXT:
        text = cut_at_word(text, MAX_TEXT).strip()
    if not text or text == current.strip() or text == WORKED_TEXT:
        return None
    if ASK_LINE in text or "Current instruction (" in text:
        return None  # the prompt echoed back
    return text


@dataclass
class Reflector:
    """GEPA's ``custom_candidate_proposer``: one chat call per component to update.

    A budget or model error ends the search: it is handed to ``on_error`` (the search
    stops at its next check and re-raises it) and the old text is kept."""

    model: ModelClient
    on_error: Callable[[ReefError], None]
    progress: Callable[[str], None] = lambda _message: None
    calls: int = 0
    unusable: int = 0

    def __call__(
        self,
        candidate: dict[str, str],
        reflective_dataset: Mapping[str, Sequence[Mapping[str, Any]]],
        components_to_update: list[str],
    ) -> dict[str, str]:
        out: dict[str, str] = {}
        for path in components_to_update:
            records = reflective_dataset.get(path) or []
            if not records:
                continue
            self.progress(f"gepa: reflecting on {path}")
            self.calls += 1
            try:
                reply = self.model.chat(
                    messages_for(path, candidate[path], records),
                    max_tokens=REFLECTION_TOKENS,
                    temperature=TEMPERATURE,
                ).text
            except ReefError as exc:  # BudgetExceeded, ModelError: the search ends
                self.on_error(exc)
                break
            text = extract(reply, candidate[path])
            if text is None:
                self.unusable += 1
                continue
            out[path] = text
        return out

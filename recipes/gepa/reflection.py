"""GEPA's reflection step, in a form a small model follows.

GEPA's default reflection prompt is long and abstract; a 1.5B model answered it with
"Certainly! Please provide the inputs…" for eleven iterations and never proposed a text.
This template is short and concrete: the current text, a few tasks with the answer it
got and the feedback, and one instruction — reply with the new text inside one fenced
block. The reply's first fenced block is the proposal; with no fence the whole reply is
(cut to a bound). An empty reply, the old text again or the prompt echoed back keeps
the old text, so GEPA spends no metric calls on a proposal that never happened.

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

Write a better instruction that fixes the problems the feedback shows. Keep what works. \
It must help with any task like these, so do not copy one task's answer into it.
{ask}"""

EXAMPLE = "Example {n}\nTask: {task}\nAnswer: {answer}\nFeedback: {feedback}"


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


def prompt_for(path: str, current: str, records: Sequence[Mapping[str, Any]]) -> str:
    examples = "\n\n".join(
        EXAMPLE.format(
            n=n,
            task=_short(r.get("Inputs", ""), 600),
            answer=_short(r.get("Generated Outputs", ""), 400),
            feedback=_short(r.get("Feedback", ""), 400),
        )
        for n, r in enumerate(pick_examples(records), 1)
    )
    return TEMPLATE.format(path=path, current=current.strip(), examples=examples, ask=ASK_LINE)


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
    if not text or text == current.strip() or ASK_LINE in text or "Current instruction (" in text:
        return None
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
            prompt = prompt_for(path, candidate[path], records)
            self.calls += 1
            try:
                reply = self.model.chat(
                    [{"role": "user", "content": prompt}],
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

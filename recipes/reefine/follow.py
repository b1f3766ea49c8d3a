"""Reefine's follow check: is the change *followed*, not only loaded?

The trial shows the change reached the agent's request; it does not show the model acts
on it. So the gate asks a few check prompts (``check_prompts``: templates over the ask's
own words, never stating the rule itself) twice — once with the served tree, once with
the candidate, each as the system prompt (the ``direct`` runner's idea) — and a judge
answers one yes/no question per answer, blind to which tree wrote it: "does this answer
follow: <ask>?" (structured, temperature 0). A prompt is a win when only the candidate's
answer follows, a loss when only the served one does, else a tie. The candidate passes on
more wins than losses and at least one win. Every call is the job's model client's, so
the job's budget counts it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from recipes.reefine.draft import Draft
from recipes.tasks.runners import render_harness
from reef_cli.core.checks import Check
from reef_cli.core.errors import ModelError
from reef_cli.core.frontmatter import split_frontmatter
from reef_cli.core.llm import ModelClient, cut_at_word

PROMPTS = 3
ANSWER_TOKENS = 160  # two or three sentences: enough to show whether the rule is followed
VERDICT_TOKENS = 60
SHOWN = 400  # characters of each answer kept in the evidence
CALLS = PROMPTS * 4  # per prompt: two answers and two verdicts

FOLLOW_SYSTEM = (
    "You check whether an answer follows an instruction. Answer with JSON only: "
    '{"follows": true or false, "reason": one short sentence}.'
)


class FollowVerdict(BaseModel):
    follows: bool
    reason: str = Field(default="", max_length=160)


_EXAMPLES = [
    (
        "Request: Please commit my changes.\nAnswer: I ran the linter, fixed two warnings, "
        "then committed.\nDoes this answer follow: always run the linter before you commit?",
        FollowVerdict(follows=True, reason="It ran the linter before committing."),
    ),
    (
        "Request: Please commit my changes.\nAnswer: Done, I committed everything.\nDoes "
        "this answer follow: always run the linter before you commit?",
        FollowVerdict(follows=False, reason="It committed without running the linter."),
    ),
]

# Prompts for an ask that sets no situation ("always answer in British English"): ordinary
# requests in which any always-on instruction shows.
GENERIC = (
    "The function add(a, b) returns a - b. Fix it and tell me what you did, briefly.",
    "Explain in two or three sentences what a unit test is for.",
    "Write a short note for a teammate on a change that renames get_user to fetch_user.",
)

_TRIGGER = re.compile(
    r"\b(?:when(?:ever)?|if|each time|every time|before|after|once)\s+(?P<t>[^,.;:!?]{3,120})",
    re.I,
)
_ASKED_TO = re.compile(
    r"^(?:I|we)\s+(?:ask|tell|want|need|get)\s+(?:you\s+)?(?:to\s+)?(?P<v>.+)$|^you\s+(?P<u>.+)$",
    re.I,
)
_NEVER = re.compile(
    r"^\s*(?:please\s+)?(?:never|do not|don'?t|avoid|stop)\s+(?P<x>[^,.;:!?]{3,120})", re.I
)


def _situation(trigger: str) -> list[str]:
    trigger = trigger.strip()
    asked = _ASKED_TO.match(trigger)
    if asked:
        v = (asked.group("v") or asked.group("u")).strip()
        return [
            f"Please {v}. What will you do? Answer in two or three sentences.",
            f"I need you to {v} in the payments module. Describe your first steps, briefly.",
            f"Next task: {v}. Walk me through how you will do it, briefly.",
        ]
    s = trigger[0].upper() + trigger[1:]
    return [
        f"{s}. What do you do? Answer in two or three sentences.",
        f"While you work on the payments module: {trigger}. What are your next steps?",
        f"Heads-up: {trigger}. How do you handle it, briefly?",
    ]


def check_prompts(ask: str, draft: Draft, n: int = PROMPTS) -> list[str]:
    """``n`` prompts in which the change should show, from the ask's wording: a command is
    invoked; a skill's description is asked for; a rule's situation ("when I ask you to
    fix a bug" -> "Please fix a bug. …") or, for "never X", a request to do X; otherwise
    ordinary requests (``GENERIC``). Deterministic: the same ask gives the same prompts."""
    if draft.kind == "command":
        found = [
            f"/{draft.name}",
            f"/{draft.name} for my latest change",
            f"Please run /{draft.name} now, then tell me what you did.",
        ]
    elif draft.kind == "skill":
        goal = draft.description.strip().rstrip(".")
        goal = goal[0].lower() + goal[1:]
        found = [
            f"I need to {goal}. What are your steps?",
            f"Help me {goal} in this repository, briefly.",
            f"Next task: {goal}. How do you go about it?",
        ]
    elif (trigger := _TRIGGER.search(ask)) is not None:
        found = _situation(trigger.group("t"))
    elif (never := _NEVER.match(ask)) is not None:
        x = never.group("x").strip()
        found = [
            f"Please {x}.",
            f"I need you to {x} right now; go ahead and say what you do.",
            f"Can you {x} for me? Tell me your steps, briefly.",
        ]
    else:
        found = list(GENERIC)
    return [p[:300] for p in found[:n]]


def render(files: dict[str, str]) -> str:
    """The tree as a system prompt: ``render_harness`` (rules, skills) and, since a
    command is what a person types, each command as what to do when it is typed."""
    parts = [render_harness(files)]
    for path in sorted(p for p in files if p.startswith("commands/") and p.endswith(".md")):
        meta, body = split_frontmatter(files[path], path)
        name = path.removeprefix("commands/").removesuffix(".md")
        description = str((meta or {}).get("description") or "").strip()
        head = f"## Command /{name}" + (f"\n{description}" if description else "")
        parts.append(f"{head}\nWhen the developer types /{name}, do this:\n{body.strip()}")
    return "\n\n".join(p for p in parts if p)


def _answer(model: ModelClient, files: dict[str, str], prompt: str) -> str:
    harness = render(files)
    messages = [{"role": "user", "content": prompt}]
    if harness:
        messages.insert(0, {"role": "system", "content": harness})
    return model.chat(messages, max_tokens=ANSWER_TOKENS, temperature=0.0).text.strip()


def verdict_messages(ask: str, prompt: str, answer: str) -> list[dict[str, str]]:
    out = [{"role": "system", "content": FOLLOW_SYSTEM}]
    for question, verdict in _EXAMPLES:
        out.append({"role": "user", "content": question})
        out.append({"role": "assistant", "content": verdict.model_dump_json()})
    question = f"Request: {prompt}\nAnswer: {answer[:1500]}\nDoes this answer follow: {ask}?"
    out.append({"role": "user", "content": question})
    return out


def _verdict(judge: ModelClient, ask: str, prompt: str, answer: str) -> FollowVerdict:
    if not answer:
        return FollowVerdict(follows=False, reason="empty answer")
    return judge.structured(
        verdict_messages(ask, prompt, answer),
        FollowVerdict,
        max_tokens=VERDICT_TOKENS,
        temperature=0.0,
    )


@dataclass
class Compared:
    """One check prompt: both answers (cut short) and both verdicts."""

    prompt: str
    served: str
    candidate: str
    served_verdict: FollowVerdict
    candidate_verdict: FollowVerdict

    @property
    def result(self) -> str:
        s, c = self.served_verdict.follows, self.candidate_verdict.follows
        return "win" if c and not s else "loss" if s and not c else "tie"

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "served": {
                "answer": cut_at_word(self.served, SHOWN),
                "follows": self.served_verdict.follows,
                "reason": self.served_verdict.reason,
            },
            "candidate": {
                "answer": cut_at_word(self.candidate, SHOWN),
                "follows": self.candidate_verdict.follows,
                "reason": self.candidate_verdict.reason,
            },
            "result": self.result,
        }


def tally(compared: list[Compared]) -> dict[str, int]:
    results = [c.result for c in compared]
    return {
        "prompts": len(compared),
        "candidate_followed": sum(c.candidate_verdict.follows for c in compared),
        "served_followed": sum(c.served_verdict.follows for c in compared),
        "wins": results.count("win"),
        "losses": results.count("loss"),
        "ties": results.count("tie"),
    }


def passes(counts: dict[str, int]) -> bool:
    """More wins than losses, and at least one: a tie everywhere is no evidence."""
    return counts["wins"] > counts["losses"] and counts["wins"] >= 1


def follow_check(
    model: ModelClient,
    judge: ModelClient,
    ask: str,
    served: dict[str, str],
    candidate: dict[str, str],
    prompts: list[str],
    *,
    served_label: str = "the served release",
) -> tuple[Check, dict[str, Any]]:
    """The ``follow`` check and its evidence. A model or judge that gives no answer makes
    the check ``invalid`` (an outage is never a pass); budget errors propagate."""
    compared: list[Compared] = []
    evidence: dict[str, Any] = {
        "model": model.describe(),
        "judge": judge.describe(),
        "question": f"does this answer follow: {ask}?",
        "served": served_label,
    }
    try:
        for prompt in prompts:
            before = _answer(model, served, prompt)
            after = _answer(model, candidate, prompt)
            compared.append(
                Compared(
                    prompt,
                    before,
                    after,
                    _verdict(judge, ask, prompt, before),
                    _verdict(judge, ask, prompt, after),
                )
            )
    except ModelError as exc:
        evidence["checks"] = [c.to_json() for c in compared]
        detail = f"no answer or verdict on check prompt {len(compared) + 1}: {exc.message}"
        return Check("follow", "invalid", detail), evidence
    counts = tally(compared)
    evidence.update(counts)
    evidence["checks"] = [c.to_json() for c in compared]
    n = counts["prompts"]
    detail = (
        f"followed on {counts['candidate_followed']} of {n} check prompt(s) with the change, "
        f"{counts['served_followed']} of {n} with {served_label}: {counts['wins']} win(s), "
        f"{counts['losses']} loss(es), {counts['ties']} tie(s) (needs more wins than "
        "losses, at least one)"
    )
    return Check("follow", "passed" if passes(counts) else "failed", detail), evidence

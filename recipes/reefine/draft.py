"""Turning an ask into one typed change with the model, then making it safe to apply.

Small models (the embedded 135M one) need few-shot examples and constrained JSON; they
also drift off topic. So the model's draft is validated and normalised here: a kebab-case
name, bounded lengths, and — if the body lost the point — the ask itself, verbatim, as
the first line. The person's words are the specification; the model adds structure.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

from recipes.base import Change
from reef_cli.core.llm import ModelClient
from reef_cli.core.names import MAX_NAME

KINDS = ("rule", "skill", "command", "extension")
MAX_BODY = 1500


class Draft(BaseModel):
    kind: Literal["rule", "skill", "command", "extension"]
    name: str = Field(min_length=2, max_length=40, pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")
    description: str = Field(min_length=5, max_length=200)
    body: str = Field(min_length=10, max_length=MAX_BODY)
    why: str = Field(min_length=5, max_length=300)


SYSTEM = (
    "You turn a developer's request into one change to their coding agent's harness. "
    "Kinds: rule (always-on instruction), skill (a procedure the agent loads when relevant), "
    "command (a slash command the developer types), extension (TypeScript code; only when "
    "code is required). Answer with JSON only: kind, name (kebab-case), description, body "
    "(markdown instructions addressed to the agent), why."
)

EXAMPLES: list[tuple[str, Draft]] = [
    (
        "always answer in British English",
        Draft(
            kind="rule",
            name="british-english",
            description="Write in British English",
            body="Write all prose, comments and commit messages in British English "
            "(colour, organise, behaviour).",
            why="The developer asked for British spelling everywhere.",
        ),
    ),
    (
        "when I say ship it, run the tests and open a pull request",
        Draft(
            kind="command",
            name="ship-it",
            description="Run the tests, then open a pull request",
            body="Run the full test suite. If it passes, commit the work and open a pull "
            "request that summarises the change. If it fails, stop and report the failures.",
            why="The developer wants one command for the test-then-PR routine.",
        ),
    ),
]


def messages_for(ask: str, tree_summary: str) -> list[dict[str, str]]:
    out = [{"role": "system", "content": SYSTEM}]
    for example_ask, draft in EXAMPLES:
        out.append({"role": "user", "content": f"Request: {example_ask}"})
        out.append({"role": "assistant", "content": draft.model_dump_json()})
    out.append({"role": "user", "content": f"Current harness: {tree_summary}\nRequest: {ask}"})
    return out


def draft_change(model: ModelClient, ask: str, tree_summary: str) -> Draft:
    draft = model.structured(messages_for(ask, tree_summary), Draft, max_tokens=500)
    return normalise(draft, ask)


_WORD = re.compile(r"[a-z]{4,}")
_STOP = frozenset(
    [
        "when",
        "with",
        "that",
        "this",
        "your",
        "have",
        "from",
        "into",
        "they",
        "them",
        "then",
        "than",
        "what",
        "will",
        "should",
        "always",
        "never",
        "every",
        "about",
        "which",
        "there",
        "their",
    ]
)


def _keywords(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


_SAYS_KIND = (
    ("command", re.compile(r"\b(?:slash command|a command|when I (?:type|say) /)", re.I)),
    ("skill", re.compile(r"\b(?:a skill|skill for|procedure|step[- ]by[- ]step)\b", re.I)),
    ("rule", re.compile(r"^\s*(?:always|never|when(?:ever)?|before|after|don'?t|do not)\b", re.I)),
)


def kind_named_by(ask: str) -> str | None:
    """The kind the person's own words ask for, if they are clear about it."""
    for kind, pattern in _SAYS_KIND:
        if pattern.search(ask):
            return kind
    return None


def normalise(draft: Draft, ask: str) -> Draft:
    """Keep the draft on the ask: the kind the person named, a kebab name, a bounded body,
    and the ask itself in the body when the model's text lost it."""
    name = re.sub(r"[^a-z0-9]+", "-", draft.name.lower()).strip("-")[:MAX_NAME] or "reef-change"
    body = draft.body.strip()
    kind = kind_named_by(ask) or draft.kind
    if kind == "extension" and "export default" not in body:
        kind = "rule"  # an "extension" without code is an instruction
    wanted = _keywords(ask)
    if wanted and len(wanted & _keywords(body)) < 0.6 * len(wanted):
        body = f"{ask.strip().rstrip('.')}.\n\n{body}"
    return draft.model_copy(
        update={"kind": kind, "name": name, "body": body[: MAX_BODY + len(ask) + 4]}
    )


def apply_draft(files: dict[str, str], draft: Draft) -> tuple[dict[str, str], Change]:
    """The incumbent files with the draft applied, and the change as metadata records it."""
    import yaml

    out = dict(files)
    body = draft.body.rstrip() + "\n"
    if draft.kind == "rule":
        path = f"rules/{draft.name}.md"
        out[path] = body
    elif draft.kind == "skill":
        path = f"skills/{draft.name}/SKILL.md"
        head = yaml.safe_dump(
            {"name": draft.name, "description": draft.description}, sort_keys=False, width=1000
        )
        out[path] = f"---\n{head}---\n\n{body}"
    elif draft.kind == "command":
        path = f"commands/{draft.name}.md"
        head = yaml.safe_dump({"description": draft.description}, sort_keys=False, width=1000)
        out[path] = f"---\n{head}---\n\n{body}"
    else:
        path = f"extensions/{draft.name}.ts"
        out[path] = body
    status = "updated" if path in files else "added"
    change = Change(
        kind=draft.kind,
        name=draft.name,
        path=path,
        why=draft.why,
        summary=f"{status} {draft.kind} {draft.name}: {draft.description}",
    )
    return out, change

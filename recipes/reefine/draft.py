"""Turning an ask into one typed change with the model, then making it safe to apply.

Small models (the embedded 135M one) need few-shot examples — one for every kind — and
constrained JSON; they also drift off topic. So the model's draft is validated and
normalised here: the kind and the command name the person's words give win over the
model's choice, names are kebab-case and lengths bounded. Whether the text is one a person
would keep is the quality gate's question (``recipes.quality``, run by the engine):
a draft that fails it is drafted once more with the reasons (``draft_change(feedback=…)``).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

from recipes.base import Change
from recipes.quality import asked_command_name
from reef_cli.core.frontmatter import with_frontmatter
from reef_cli.core.llm import ModelClient
from reef_cli.core.names import MAX_NAME

KINDS = ("rule", "skill", "command", "extension")
MAX_BODY = 1500
MAX_DRAFT_TOKENS = 500  # ~ 1,500 characters of body plus the other fields


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
    "code is required). Answer with JSON only: kind, name (kebab-case, at most 40 "
    "characters; for a command, the name the developer gave), description (one sentence), "
    "body (2 to 6 short sentences or numbered steps of markdown addressed to the agent, "
    "using the request's own words; no links, hashtags or placeholders), why (one sentence)."
)

EXAMPLES: list[tuple[str, Draft]] = [
    (
        "always answer in British English",
        Draft(
            kind="rule",
            name="british-english",
            description="Write in British English",
            body="Write all prose, comments and commit messages in British English. Use "
            "British spellings such as colour, organise and behaviour.",
            why="The developer asked for British spelling everywhere.",
        ),
    ),
    (
        "add a skill for writing a database migration",
        Draft(
            kind="skill",
            name="database-migration",
            description="Write a safe, reversible database migration",
            body="1. Read the current schema and the models that changed.\n2. Write the "
            "migration with both an upgrade and a downgrade step.\n3. Run it against a "
            "scratch database, then run the tests.\n4. Report the commands you ran.",
            why="The developer wants migrations written the same careful way each time.",
        ),
    ),
    (
        "add a /ship-it command that runs the tests and opens a pull request",
        Draft(
            kind="command",
            name="ship-it",
            description="Run the tests, then open a pull request",
            body="Run the full test suite. If it passes, commit the work and open a pull "
            "request that summarises the change. If it fails, stop and report the failures.",
            why="The developer wants one command for the test-then-PR routine.",
        ),
    ),
    (
        "write an extension that greets me when a session starts",
        Draft(
            kind="extension",
            name="session-greeting",
            description="Greet the developer when a session starts",
            body='export default function (pi) {\n  pi.on("session_start", (_event, ctx) '
            '=> {\n    ctx.ui.notify("Welcome back.", "info");\n  });\n}\n',
            why="The developer asked for a greeting, which needs code that runs on an event.",
        ),
    ),
]


def messages_for(
    ask: str,
    tree_summary: str,
    feedback: list[str] | None = None,
    previous: Draft | None = None,
) -> list[dict[str, str]]:
    out = [{"role": "system", "content": SYSTEM}]
    for example_ask, draft in EXAMPLES:
        out.append({"role": "user", "content": f"Request: {example_ask}"})
        out.append({"role": "assistant", "content": draft.model_dump_json()})
    request = f"Current harness: {tree_summary}\nRequest: {ask}"
    hint = hints_for(ask)
    if hint:
        request += f"\n{hint}"
    out.append({"role": "user", "content": request})
    if feedback:
        if previous is not None:
            out.append({"role": "assistant", "content": previous.model_dump_json()})
        reasons = "\n".join(f"- {line}" for line in feedback[:6])
        out.append(
            {
                "role": "user",
                "content": "That draft was rejected:\n"
                f"{reasons}\nWrite a better draft for the same request: on the request's "
                "words, at least two clear instructions, no debris. JSON only.",
            }
        )
    return out


def draft_change(
    model: ModelClient,
    ask: str,
    tree_summary: str,
    *,
    feedback: list[str] | None = None,
    previous: Draft | None = None,
) -> Draft:
    """The model's draft for ``ask``, normalised; ``feedback`` (the quality gate's reasons
    for rejecting ``previous``) makes it a second attempt."""
    draft = model.structured(
        messages_for(ask, tree_summary, feedback, previous), Draft, max_tokens=MAX_DRAFT_TOKENS
    )
    return normalise(draft, ask)


_SAYS_KIND = (
    (
        "command",
        re.compile(
            r"\b(?:slash[- ]command|(?:a|an|the|new)\s+(?:[\w-]+\s+)?command\b"
            r"|command (?:called|named)|when I (?:type|say) /)",
            re.I,
        ),
    ),
    ("extension", re.compile(r"\b(?:an|pi) extension\b|\bextension (?:that|which|to)\b", re.I)),
    ("skill", re.compile(r"\bskills?\b|\bprocedure\b|\bstep[- ]by[- ]step\b", re.I)),
    (
        "rule",
        re.compile(
            r"\b(?:always|never)\b|^\s*(?:please\s+)?(?:when(?:ever)?|before|after|don'?t|"
            r"do not|from now on)\b",
            re.I,
        ),
    ),
)


def kind_named_by(ask: str) -> str | None:
    """The kind the person's own words ask for, if they are clear about it: "/name" or
    "a … command" is a command, "skill" a skill, "an extension" an extension, "always …",
    "never …", "when …" a rule."""
    if asked_command_name(ask) is not None:
        return "command"
    for kind, pattern in _SAYS_KIND:
        if pattern.search(ask):
            return kind
    return None


def hints_for(ask: str) -> str:
    """What the person's words already decide, told to the model up front."""
    kind, name = kind_named_by(ask), asked_command_name(ask)
    if kind == "command" and name:
        return f"This is a command named {name}."
    if not kind:
        return ""
    return f"This is an {kind}." if kind == "extension" else f"This is a {kind}."


def normalise(draft: Draft, ask: str) -> Draft:
    """Keep the draft on the ask: the kind (and a command's name) the person named, a kebab
    name and a bounded body."""
    name = re.sub(r"[^a-z0-9]+", "-", draft.name.lower()).strip("-")[:MAX_NAME] or "reef-change"
    body = draft.body.strip()
    kind = kind_named_by(ask) or draft.kind
    if kind == "extension" and "export default" not in body:
        kind = "rule"  # an "extension" without code is an instruction
    asked = asked_command_name(ask)
    if kind == "command" and asked:
        name = asked
    return draft.model_copy(update={"kind": kind, "name": name, "body": body[:MAX_BODY]})


def apply_draft(files: dict[str, str], draft: Draft) -> tuple[dict[str, str], Change]:
    """The incumbent files with the draft applied, and the change as metadata records it."""
    out = dict(files)
    body = draft.body.rstrip() + "\n"
    if draft.kind == "rule":
        path = f"rules/{draft.name}.md"
        out[path] = with_frontmatter({}, body)  # a body opening with --- still reads back
    elif draft.kind == "skill":
        path = f"skills/{draft.name}/SKILL.md"
        head = {"name": draft.name, "description": draft.description}
        out[path] = with_frontmatter(head, "\n" + body)
    elif draft.kind == "command":
        path = f"commands/{draft.name}.md"
        out[path] = with_frontmatter({"description": draft.description}, "\n" + body)
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

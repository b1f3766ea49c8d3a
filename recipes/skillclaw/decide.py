"""Group the batch by the skills its sessions used and let the model decide, per group,
one edit: improve a skill's body, optimise its description, create a skill, or skip.

A session joins the group of every skill it used that the served tree has; a session
that used none (or only skills the tree no longer has) joins the no-skill group. One
structured call per group, with a short prompt a small model manages: the skill's text,
the group's sessions (request, answer, score, feedback — cut short, failures first),
and a worked example. The model names the sessions its edit is based on (``S1`` …).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from recipes.skillclaw.guard import clean, holds_credential
from recipes.skillclaw.signals import Scored
from recipes.skillclaw.skills import SkillText
from reef_cli.core.llm import ModelClient

MAX_GROUPS = 10  # decisions per run; sessions only in later groups wait for the next run
PER_GROUP = 6  # sessions a group's prompt shows
SHOWN = 300  # characters of a request, an answer or a feedback text in a prompt
SKILL_SHOWN = 2500  # characters of the current body in a prompt
# The wire bounds are looser than the verifier's (verify.py): an overlong body must be
# seen, and dropped, rather than silently cut to fit.
WIRE_BODY = 8000
WIRE_DESCRIPTION = 600
DECISION_TOKENS = 1600

Action = Literal["improve_skill", "optimize_description", "create_skill", "skip"]


class Decision(BaseModel):
    action: Action
    skill: str = Field("", max_length=80)
    description: str = Field("", max_length=WIRE_DESCRIPTION)
    body: str = Field("", max_length=WIRE_BODY)
    sessions: list[str] = Field(default_factory=list, max_length=20)
    why: str = Field("", max_length=300)


@dataclass
class Group:
    skill: str | None  # None: the sessions that used no skill of the tree
    sessions: list[Scored] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.skill or "(no skill)"


def groups(scored: list[Scored], skill_names: set[str]) -> list[Group]:
    """Groups of the scored sessions, the largest first (at most ``MAX_GROUPS``); a group
    whose sessions all scored 1 is left out (its sessions are consumed, not decided on)."""
    by_skill: dict[str | None, Group] = {}
    for item in scored:
        if item.score is None:
            continue
        used: list[str | None] = [s for s in item.session.skills_used if s in skill_names]
        for skill in used or [None]:
            by_skill.setdefault(skill, Group(skill)).sessions.append(item)
    # A group where every session went well has nothing to fix: no decision call for it.
    kept = [g for g in by_skill.values() if any((s.score or 0.0) < 1.0 for s in g.sessions)]
    ordered = sorted(kept, key=lambda g: (-len(g.sessions), g.skill is None, g.name))
    return ordered[:MAX_GROUPS]


SYSTEM = (
    "You maintain a coding agent's skills: markdown procedures it follows. Read how the "
    "agent did in recent sessions and decide one change. Actions: improve_skill (the whole "
    "new body of the skill shown: keep every line it has and add the steps the feedback "
    "shows are missing), optimize_description (a better one-sentence description of when "
    "to use the skill), create_skill (a new skill: kebab-case name, one-sentence "
    "description, a body of numbered steps), skip (nothing to learn). Name in sessions the "
    "sessions (S1, S2 ...) the change is based on. Answer with JSON only: action, skill, "
    "description, body, sessions, why (one sentence)."
)

_EXAMPLE_PROMPT = """Skill: write-tests
Description: Write focused tests for new or changed behaviour.
Body:
1. Find the test file that mirrors the module you touch.
2. Write one test per behaviour.

Sessions:
S1 score 0.00
User: add a test for the date parser
Agent: I wrote test_parse in tests/test_dates.py.
Feedback: you forgot to run it, it fails
S2 score 1.00
User: test the retry helper
Agent: I added two tests and ran them; both pass."""

_EXAMPLE = Decision(
    action="improve_skill",
    skill="write-tests",
    body="1. Find the test file that mirrors the module you touch.\n2. Write one test per "
    "behaviour.\n3. Run the new tests and show they pass before you say you are done.",
    sessions=["S1"],
    why="In S1 the agent did not run the test it wrote.",
)


def session_lines(item: Scored) -> list[str]:
    """How one session reads in a prompt."""
    lines = [f"{item.label} score {item.score:.2f}" if item.score is not None else item.label]
    lines.append(f"User: {_short(item.asked())}")
    lines.append(f"Agent: {_short(item.answered())}")
    for text in item.feedback[:2]:
        lines.append(f"Feedback: {_short(text)}")
    return lines


def _short(text: str, limit: int = SHOWN) -> str:
    flat = " ".join(text.split())
    return flat[:limit] + ("…" if len(flat) > limit else "")


def messages_for(
    group: Group, skill: SkillText | None, skill_names: list[str]
) -> list[dict[str, str]] | None:
    """The decision prompt; None when no session could be shown without a credential."""
    shown = []
    for item in sorted(group.sessions, key=lambda s: (s.score or 0.0, s.label))[:PER_GROUP]:
        lines = session_lines(item)
        if not holds_credential("\n".join(lines)):
            shown += lines
    if not shown:
        return None
    if skill is not None:
        head = (
            f"Skill: {skill.name}\nDescription: {skill.description}\nBody:\n"
            f"{skill.body.strip()[:SKILL_SHOWN]}"
        )
    else:
        names = ", ".join(skill_names[:30]) or "none"
        head = (
            f"Skill: none (these sessions used no skill; the existing skills are: {names}). "
            "Create a skill, improve an existing one by name, or skip."
        )
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": _EXAMPLE_PROMPT},
        {"role": "assistant", "content": _EXAMPLE.model_dump_json()},
        {"role": "user", "content": head + "\n\nSessions:\n" + "\n".join(shown)},
    ]
    return messages if clean(messages) else None


def decide(
    model: ModelClient, group: Group, skill: SkillText | None, skill_names: list[str]
) -> Decision | None:
    """The model's decision for ``group`` (None: nothing could be shown). A model failure
    raises ``ModelError``: the job fails and the batch waits for the next run."""
    messages = messages_for(group, skill, skill_names)
    if messages is None:
        return None
    return model.structured(messages, Decision, max_tokens=DECISION_TOKENS, temperature=0.0)


@dataclass
class Edit:
    """One decided change, its cited sessions resolved against the batch."""

    kind: str  # improve_skill | optimize_description | create_skill
    skill: str
    description: str
    body: str
    why: str
    group: str
    sessions: list[str] = field(default_factory=list)  # keys of cited sessions in the batch
    unknown: list[str] = field(default_factory=list)  # cited, but not in the batch
    merge: dict[str, Any] | None = None
    verifier: float | None = None

    def brief(self) -> dict[str, Any]:
        """What evidence says of the edit (names and keys, never the model's text)."""
        skill = "[withheld]" if holds_credential(self.skill) else self.skill
        return {"kind": self.kind, "skill": skill, "group": self.group, "sessions": self.sessions}


_LABEL = re.compile(r"^s(\d{1,4})$", re.I)


def edit_of(decision: Decision, group: Group, batch: dict[str, Scored]) -> Edit | None:
    """``decision`` as an edit (None for skip); ``batch``: label and key -> session."""
    if decision.action == "skip":
        return None
    own = group.skill if decision.action != "create_skill" else None
    skill = decision.skill.strip() or own or ""
    edit = Edit(
        kind=decision.action,
        skill=skill,
        description=" ".join(decision.description.split()),
        body=decision.body.strip(),
        why=" ".join(decision.why.split()),
        group=group.name,
    )
    for cited in decision.sessions:
        token = cited.strip()
        label = _LABEL.match(token)
        found = batch.get(f"S{int(label.group(1))}" if label else token)
        if found is None:
            edit.unknown.append(token[:80])
        elif found.key not in edit.sessions:
            edit.sessions.append(found.key)
    return edit

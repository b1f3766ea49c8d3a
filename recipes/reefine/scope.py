"""Keeping a draft inside its ask: sentences that add actions the ask never named are cut.

A model asked to "reproduce bugs with a failing test first" likes to end with "Commit the
changes and push to the repository": an action with effects beyond the work tree that
nobody asked for. ``ACTIONS`` is that class — push, force, delete, deploy, network,
install, migrations, history rewrite, messages — each a pattern for the draft's text and
one for the words (or synonyms) that name it in an ask. Deterministic on purpose: the
embedded model wrote the creep, so it cannot be the one to find it.

A draft's body is split into units (a line, a list item, each sentence of a line; a
fenced block is one unit). A unit that names an action of the class which the ask does
not name is removed; one that only forbids it ("never force-push") adds no action and is
kept. What remains is the draft that gets applied; a draft left with nothing to act on is
refused (``DraftOutOfScope``, raised by the recipe).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from recipes.quality import actionable_sentences
from recipes.reefine.draft import Draft
from reef_cli.core.errors import GateBlocked


class DraftOutOfScope(GateBlocked):
    """Every instruction in a draft added an action the ask did not name."""


@dataclass(frozen=True)
class Action:
    name: str
    does: re.Pattern[str]  # the action in a draft's text
    named: re.Pattern[str]  # the words that name it in an ask


def _re(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I)


_OBJECTS = (
    r"(?:files?|folders?|director(?:y|ies)|branch(?:es)?|data|databases?|tables?|records?"
    r"|repositor(?:y|ies)|repos?)"
)

ACTIONS: tuple[Action, ...] = (
    Action(
        "push",
        _re(
            r"\bpush(?:es|ed|ing)?\b|\b(?:open|create|submit|raise|file)s?\s+(?:a\s+|an\s+|the\s+)?"
            r"(?:pull|merge)\s+requests?\b"
        ),
        _re(r"\bpush|\b(?:pull|merge)[- ]requests?\b|\bPRs?\b|\bupstream\b|\bremote\b"),
    ),
    Action("force", _re(r"--force\b|\bforce[- ]?push\w*|\bforce\b"), _re(r"\bforc")),
    Action(
        "delete",
        _re(
            r"\bdelet(?:e|es|ed|ing)\b|\brm\s+-?\w|\berase\w*|\bwipe\w*|\bpurge\w*|\bunlink\w*"
            r"|\bgit\s+clean\b|\bdrop\s+(?:the\s+)?(?:tables?|databases?)\b"
            rf"|\bremov(?:e|es|ed|ing)\s+(?:[\w.-]+\s+){{0,3}}?{_OBJECTS}\b"
        ),
        _re(r"\bdelet|\bremov|\brm\b|\berase|\bwipe|\bpurge|\bclean\s*up\b|\bdrop\b|\bunlink"),
    ),
    Action(
        "deploy",
        _re(
            r"\bdeploy\w*|\bpublish\w*|\brelease\s+(?:it|them|this|to|a\s+new|the\s+\w+)\b"
            r"|\bcut\s+a\s+release\b|\bship\s+(?:it\s+)?to\s+(?:prod\w*|users|customers)\b"
            r"|\bgo\s+live\b|\btwine\s+upload\b"
        ),
        _re(r"\bdeploy|\bpublish|\breleas|\bship\b|\bprod(?:uction)?\b|\blive\b"),
    ),
    Action(
        "network",
        _re(
            r"\bcurl\b|\bwget\b|https?://|\bhttp\s+(?:request|call|post|get)s?\b|\bupload\w*"
            r"|\bdownload\w*|\binternet\b|\bweb\s*hooks?\b|\bonline\b"
            r"|\b(?:external|remote|third[- ]party)\s+(?:api|server|service)s?\b"
            r"|\bsend\s+(?:[\w.-]+\s+){0,3}?to\s+(?:an?\s+|the\s+|your\s+)?"
            r"(?:server|endpoint|url|api)\b"
        ),
        _re(
            r"\bcurl|\bwget|https?:|\bhttp\b|\bupload|\bdownload|\binternet|\bnetwork|\bonline"
            r"|\bwebhook|\bfetch|\burl\b|\bendpoint"
        ),
    ),
    Action(
        "install",
        _re(
            r"\binstall\w*|\b(?:pip|npm|yarn|pnpm|cargo|gem|brew|apt(?:-get)?|go)\s+(?:add|get)\b"
            r"|\badd\s+(?:a\s+|the\s+|new\s+)?(?:dependency|dependencies|package|library)\b"
            r"|\b(?:upgrade|update|bump)\s+(?:the\s+|all\s+)?(?:dependencies|packages|libraries)\b"
        ),
        _re(r"\binstall|\bdependenc|\bpackage|\blibrar|\bpip\b|\bnpm\b|\bupgrade"),
    ),
    Action(
        "migrations",
        _re(
            r"\b(?:run|apply|execute)s?\s+(?:[\w.-]+\s+){0,2}?migrations?\b|\bmigrate\b"
            r"|\balembic\s+upgrade\b"
        ),
        _re(r"\bmigrat|\bschema"),
    ),
    Action(
        "history rewrite",
        _re(
            r"\brebas\w*|\breset\s+--hard\b|\bgit\s+reset\b|--amend\b|\bamend\s+(?:the\s+)?"
            r"(?:last\s+|previous\s+)?commits?\b|\bsquash\w*|\brewrit\w*\s+(?:the\s+)?(?:git\s+)?"
            r"history\b|\bfilter-(?:branch|repo)\b"
        ),
        _re(r"\brebas|\breset\b|\bamend|\bsquash|\bhistory|\bfilter-"),
    ),
    Action(
        "messages",
        _re(
            r"\be-?mail\w*|\bslack\b|\bnotify\w*|\btweet\w*"
            r"|\bsend\s+(?:[\w.-]+\s+){0,3}?(?:messages?|notifications?|emails?|dms?)\b"
            r"|\bpost\s+(?:[\w.-]+\s+){0,3}?(?:to|in|on)\s+(?:the\s+)?"
            r"(?:slack|teams|discord|channel|chat)\b"
        ),
        _re(
            r"\be-?mail|\bslack|\bnotif|\b(?:send|post)\w*\s+(?:a\s+|the\s+)?messag|\bteams\b"
            r"|\bdiscord|\bchannel|\btweet|\bDMs?\b"
        ),
    ),
)

# A clause that forbids the action adds none ("never force-push", "do not delete files") —
# unless the unit lets it happen later ("do not push until …", "never deploy without
# asking"). The negation must be in the action's own clause: "if they do not fail, push"
# still pushes. Erring this way only ever cuts a prohibition, never keeps an action.
_FORBIDS = _re(r"\b(?:never|not|don'?t|dont|mustn'?t|shouldn'?t|avoid|refuse|no|without)\b")
_LETS = _re(r"\b(?:until|unless|except|without\s+(?:asking|approval|permission|confirm\w*))\b")
_CLAUSE = _re(r"[;:,]|\b(?:then|if|when|once|after|otherwise|and|but|so)\b")


def named_actions(ask: str) -> set[str]:
    """The actions of the class the ask names, by their keyword or a synonym."""
    return {a.name for a in ACTIONS if a.named.search(ask)}


def actions_in(unit: str) -> list[tuple[str, str]]:
    """(action, the words that name it) for each action ``unit`` adds, in class order; an
    action the unit only forbids is not one it adds."""
    lets = _LETS.search(unit) is not None
    found = []
    for action in ACTIONS:
        for match in action.does.finditer(unit):
            if not lets and _forbidden(unit[: match.start()]):
                continue
            found.append((action.name, match.group(0).strip()))
            break
    return found


def _forbidden(before: str) -> bool:
    """Whether the clause that ends at an action's words negates it."""
    breaks = [m.end() for m in _CLAUSE.finditer(before)]
    clause = before[breaks[-1] :] if breaks else before
    return _FORBIDS.search(clause) is not None


@dataclass
class Trimmed:
    """One removed unit and why."""

    text: str
    actions: list[str]
    words: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text[:300], "actions": self.actions, "words": self.words}


@dataclass
class Scope:
    """The draft as applied (``draft``), what was cut from it and what the ask named."""

    draft: Draft
    trimmed: list[Trimmed] = field(default_factory=list)
    description_replaced: str | None = None
    named: list[str] = field(default_factory=list)
    checked: bool = True
    empty: bool = False  # nothing actionable was left: the draft is refused

    @property
    def actions(self) -> list[str]:
        return sorted({a for t in self.trimmed for a in t.actions})

    def note(self) -> str:
        """A few words for the change's summary ("" when nothing was cut)."""
        if not self.trimmed and self.description_replaced is None:
            return ""
        n = len(self.trimmed)
        return (
            f"trimmed {n} sentence{'s' if n != 1 else ''} adding actions the ask did not "
            f"name: {', '.join(self.actions) or 'in the description'}"
        )

    def refusal(self) -> DraftOutOfScope:
        cut = "; ".join(f"{', '.join(t.actions)}: {t.text[:60]!r}" for t in self.trimmed[:3])
        return DraftOutOfScope(
            f"the draft only adds actions the ask did not name ({cut}); nothing is left to "
            "apply, nothing published",
            "name the action in the ask if you want it (e.g. '… then push the branch'), or "
            "ask again",
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "checked": self.checked,
            "named_by_ask": self.named,
            "trimmed": [t.to_json() for t in self.trimmed],
        }
        if self.description_replaced is not None:
            out["description_replaced"] = self.description_replaced[:300]
        return out


_ITEM = re.compile(r"^(\s*(?:[-*+]|\d+[.)])\s+|\s*#+\s+|\s*>\s*)?(.*)$")
_NUMBERED = re.compile(r"^(\s*)(\d+)([.)]\s+)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _units(body: str) -> list[tuple[str, list[str]]]:
    """(line prefix, its sentences) per line; a fenced block is one unit with prefix None."""
    out: list[tuple[str, list[str]]] = []
    fence: list[str] | None = None
    for line in body.splitlines():
        if fence is not None:
            fence.append(line)
            if line.strip().startswith("```"):
                out.append(("\0", ["\n".join(fence)]))
                fence = None
            continue
        if line.strip().startswith("```"):
            fence = [line]
            continue
        match = _ITEM.match(line)
        prefix, rest = (match.group(1) or "", match.group(2)) if match else ("", line)
        sentences = [s for s in _SENTENCE_END.split(rest) if s.strip()]
        out.append((prefix, sentences))
    if fence is not None:  # an unclosed fence: the quality gate names it; keep it whole
        out.append(("\0", ["\n".join(fence)]))
    return out


def _renumber(lines: list[str]) -> list[str]:
    """Numbered list items renumbered in each run, so a cut step leaves no gap."""
    out, expected = [], None
    for line in lines:
        match = _NUMBERED.match(line)
        if match is None:
            expected = None
            out.append(line)
            continue
        number = int(match.group(2)) if expected is None else expected
        out.append(f"{match.group(1)}{number}{match.group(3)}{line[match.end() :]}")
        expected = number + 1
    return out


def trim_text(text: str, named: set[str]) -> tuple[str, list[Trimmed]]:
    """``text`` without the units that add actions outside ``named``, and those units."""
    kept_lines: list[str] = []
    trimmed: list[Trimmed] = []
    for prefix, sentences in _units(text):
        if prefix == "\0":  # a fenced block, whole
            found = [(a, w) for a, w in actions_in(sentences[0]) if a not in named]
            if found:
                trimmed.append(Trimmed(sentences[0], [a for a, _ in found], [w for _, w in found]))
            else:
                kept_lines.append(sentences[0])
            continue
        if not sentences:
            kept_lines.append(prefix.rstrip())
            continue
        kept = []
        for sentence in sentences:
            found = [(a, w) for a, w in actions_in(sentence) if a not in named]
            if found:
                trimmed.append(Trimmed(sentence, [a for a, _ in found], [w for _, w in found]))
            else:
                kept.append(sentence)
        if kept:
            kept_lines.append(prefix + " ".join(kept))
    body = "\n".join(_renumber(kept_lines))
    body = re.sub(r"\n{3,}", "\n\n", body).strip()
    return body, trimmed


def trim_draft(draft: Draft, ask: str) -> Scope:
    """The draft with every unit that adds an action the ask did not name removed (its
    description replaced by the first instruction left when it names one too). Extension
    code is not cut — it would no longer run — and waits for a person's review anyway.
    ``Scope.empty`` when nothing actionable is left (``Scope.refusal()`` says so)."""
    named = named_actions(ask)
    if draft.kind == "extension":
        return Scope(draft, named=sorted(named), checked=False)
    body, trimmed = trim_text(draft.body, named)
    scope = Scope(draft, trimmed, named=sorted(named))
    creep_in_description = any(a not in named for a, _ in actions_in(draft.description))
    if not trimmed and not creep_in_description:
        return scope
    left = actionable_sentences(body)
    if len(body) < 10 or not left:
        scope.empty = True
        return scope
    description = draft.description
    if creep_in_description:
        scope.description_replaced = description
        description = left[0][:200] if len(left[0]) >= 5 else description
    scope.draft = draft.model_copy(update={"body": body, "description": description})
    return scope

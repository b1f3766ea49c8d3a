"""What the person said -> rules and facts: SkillClaw's path for complaints and corrections.

A report's feedback on a failed answer (score below 1) is split into sentences; equal
sentences (after normalising) are one complaint, citing every report that said it. Each
complaint becomes one line through a small structured call (``Line``: kind ``rule``, an
imperative instruction; ``fact``, a statement about the person's world; ``none``, nothing
to learn — "that is wrong" says only that) that the 1.5B embedded model completes: a
short prompt, two worked examples, a 60-token answer. The line is checked
deterministically: it must keep the complaint's content words and numbers and be short;
otherwise the complaint's own words are used (a rule without its "please"). Rules go to
``rules/user-preferences.md``, facts to ``rules/user-facts.md``; a line equal to one the
file has merges into it (its citations join) and nothing is ever dropped. Each line
cites its reports in an HTML comment, which ``render_harness`` leaves out of prompts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field

from recipes.skillclaw.guard import clean, holds_credential
from recipes.skillclaw.signals import Scored
from reef_cli.core.errors import ModelError
from reef_cli.core.llm import ModelClient

RULES_PATH = "rules/user-preferences.md"
FACTS_PATH = "rules/user-facts.md"
HEADINGS = {
    RULES_PATH: "# What the user asked for\n\nFollow these in every answer:",
    FACTS_PATH: "# Facts of the user's world\n\nUse these facts; they are true here:",
}
MAX_COMPLAINTS = 12  # distinct complaints per run (the most cited first)
MAX_LINE = 220
CITED = 6  # report ids written next to a line (the rest are counted)
LINE_TOKENS = 80

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")
_CITATION = re.compile(r"\s*<!--\s*reports?:\s*(.*?)\s*-->\s*$")
_WORD = re.compile(r"[a-z0-9]+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_POLITE = re.compile(r"^(?:please|pls|kindly)[,:]?\s+", re.I)
# Words that carry no content of their own: a line may drop these and still say the same.
_STOP_WORDS = """a an the and or but so to of in on at for with by from as is are was were be
been it its this that these those i you your my me we our us please do does did not no
don't can could would should will just only also any all each every one two more less very
there here than then when what which who how why if into out up about again"""
_STOP = frozenset(_STOP_WORDS.split())
# A sentence made only of these (with stop words) is a verdict, not something to keep.
_VERDICT_WORDS = """wrong incorrect bad right correct answer total result reply response
number mistake error false true that's it's"""
_VERDICT = frozenset(_VERDICT_WORDS.split())


class Line(BaseModel):
    """The model's answer for one complaint."""

    kind: Literal["rule", "fact", "none"]
    text: str = Field("", max_length=400)


@dataclass
class Complaint:
    text: str
    reports: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)  # session keys


@dataclass
class Learned:
    """One line to write, where it came from and how it was made."""

    kind: Literal["rule", "fact"]
    text: str
    complaint: str
    reports: list[str]
    sessions: list[str]
    made_by: str  # "model" | "verbatim" (the model's line failed a check, or no model)
    merged: bool = False  # equal to a line the file had: citations joined


def sentences(text: str) -> list[str]:
    flat = " ".join(text.split())
    return [s.strip() for s in _SENTENCE.split(flat) if s.strip()]


def _key(text: str) -> str:
    return " ".join(_WORD.findall(_POLITE.sub("", text.lower())))


def _content(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1}


def complaints(scored: list[Scored]) -> list[Complaint]:
    """The distinct sentences of the feedback on failed answers, most cited first."""
    found: dict[str, Complaint] = {}
    for item in scored:
        if item.score is None or item.score >= 1.0:
            continue
        for report in item.session.reports:
            if not report.text or holds_credential(report.text):
                continue
            for sentence in sentences(report.text):
                key = _key(sentence)
                if not key:
                    continue
                complaint = found.setdefault(key, Complaint(sentence))
                if report.id not in complaint.reports:
                    complaint.reports.append(report.id)
                if item.key not in complaint.sessions:
                    complaint.sessions.append(item.key)
    ranked = sorted(found.values(), key=lambda c: -len(c.reports))
    return ranked[:MAX_COMPLAINTS]


SYSTEM = (
    "You turn what a user said about an assistant's answer into one line for the "
    "assistant's standing instructions. kind rule: an instruction for every future answer, "
    "starting with a verb. kind fact: a fact about the user's world, stated plainly. kind "
    "none: it only says the answer was wrong, or there is nothing to keep. Keep the user's "
    'own words and numbers. Answer with JSON only: {"kind": ..., "text": ...}.'
)
_EXAMPLES = (
    (
        "Please don't use tables, I read replies on my phone.",
        Line(kind="rule", text="Do not use tables in answers."),
    ),
    (
        "Our staging server listens on port 8443.",
        Line(kind="fact", text="The staging server listens on port 8443."),
    ),
    ("Thanks, that was great.", Line(kind="none", text="")),
)


def messages_for(complaint: str) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": SYSTEM}]
    for said, line in _EXAMPLES:
        messages.append({"role": "user", "content": f"The user said: {said}"})
        messages.append({"role": "assistant", "content": line.model_dump_json()})
    messages.append({"role": "user", "content": f"The user said: {complaint}"})
    return messages


def looks_like_fact(sentence: str) -> bool:
    """A statement with a number or a "has/is/are" and no request in it."""
    lower = sentence.lower()
    if _POLITE.match(sentence) or re.match(
        r"^(?:do|don't|never|always|use|write|end|start)\b", lower
    ):
        return False
    return bool(_NUMBER.search(sentence)) and bool(re.search(r"\b(?:is|are|has|have)\b", lower))


def verbatim(complaint: str) -> tuple[Literal["rule", "fact"], str] | None:
    """The complaint's own words as a line: a fact as it stands, else an instruction with
    its "please" dropped; None for a bare verdict with no content ("That is wrong.")."""
    text = complaint.strip()
    if looks_like_fact(text):
        return "fact", text
    core = _POLITE.sub("", text)
    if len(_content(core) - _VERDICT) < 2:
        return None
    return "rule", core[:1].upper() + core[1:]


def faithful(line: Line, complaint: str) -> bool:
    """The model's line keeps the complaint's numbers and most of its content words, and
    adds no number of its own: a line that drifts from what was said is not used."""
    text = " ".join(line.text.split())
    if not text or len(text) > MAX_LINE or holds_credential(text):
        return False
    said, wrote = _content(complaint), _content(text)
    if set(_NUMBER.findall(complaint)) != set(_NUMBER.findall(text)):
        return False
    return bool(said) and len(said & wrote) >= max(1, (len(said) + 1) // 2)


def learn(model: ModelClient | None, complaint: Complaint) -> Learned | None:
    """One complaint as one line, or None when it teaches nothing."""
    fallback = verbatim(complaint.text)
    if fallback is None:
        return None  # a bare verdict ("That total is wrong."): no model call
    kind, text = fallback
    made_by = "verbatim"
    messages = messages_for(complaint.text)
    if model is not None and clean(messages):
        try:
            line = model.structured(messages, Line, max_tokens=LINE_TOKENS, temperature=0)
        except ModelError:
            line = None
        if line is not None and line.kind == "none":
            return None
        if line is not None and line.kind != "none" and faithful(line, complaint.text):
            made_by, kind, text = "model", line.kind, " ".join(line.text.split())
    return Learned(kind, text, complaint.text, complaint.reports, complaint.sessions, made_by)


# ------------------------------------------------------------------ the files


@dataclass
class _Entry:
    text: str
    reports: list[str]
    hidden: int = 0  # citations counted, not listed


def _parse(body: str) -> list[_Entry]:
    out = []
    for raw in body.splitlines():
        if not raw.startswith("- "):
            continue
        line = raw[2:]
        match = _CITATION.search(line)
        reports: list[str] = []
        hidden = 0
        if match:
            line = line[: match.start()]
            for part in match.group(1).split(","):
                part = part.strip()
                more = re.fullmatch(r"\+(\d+) more", part)
                if more:
                    hidden += int(more.group(1))
                elif part:
                    reports.append(part)
        out.append(_Entry(line.strip(), reports, hidden))
    return out


def _render(path: str, entries: list[_Entry]) -> str:
    lines = [HEADINGS[path], ""]
    for entry in entries:
        shown = entry.reports[:CITED]
        extra = len(entry.reports) - len(shown) + entry.hidden
        cites = ", ".join(shown + ([f"+{extra} more"] if extra else []))
        lines.append(f"- {entry.text}" + (f" <!-- reports: {cites} -->" if cites else ""))
    return "\n".join(lines) + "\n"


def apply(files: dict[str, str], learned: list[Learned]) -> dict[str, str]:
    """``files`` with every learned line merged into its file: an equal line (after
    normalising) joins citations, a new one is appended; no existing line is dropped.
    Sets ``Learned.merged``. Returns only the files that changed."""
    changed: dict[str, str] = {}
    for path in (RULES_PATH, FACTS_PATH):
        kind = "rule" if path == RULES_PATH else "fact"
        mine = [item for item in learned if item.kind == kind]
        if not mine:
            continue
        entries = _parse(files.get(path, ""))
        for item in mine:
            same = next((e for e in entries if _key(e.text) == _key(item.text)), None)
            if same is None:
                entries.append(_Entry(item.text, list(item.reports)))
                continue
            item.merged = True
            same.reports += [r for r in item.reports if r not in same.reports]
        text = _render(path, entries)
        if text != files.get(path):
            changed[path] = text
    return changed

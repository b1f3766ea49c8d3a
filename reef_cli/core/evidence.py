"""Evidence for learning from traffic: one scenario's sessions, their feedback, what is new.

A **session** is the records that share a session id (a record without one is a session
of its own), joined with the agent's harvested transcript (``record_session_id``) where
there is one, and with every report that references one of its receipts. The turns are
the person's requests and the model's answers — from the transcript when harvested, else
from the recorded requests and responses — with the harness (system prompts) left out.
A turn that holds a credential is withheld here, before any recipe or model sees it.

A **mark** (``scenarios/<S>/<name>.json``) remembers each session's fingerprint when a
run consumed it, so the next run reads only sessions that are new or have grown (more
records, a new report, a longer transcript); an unchanged re-harvest is skipped.

**Eligibility** is what the live loop counts: new sessions with a score (a report's
score, or an implicit signal a recipe found) recorded under a release at most
``max_staleness`` releases older than the served one; older ones are counted as stale.
Core code: the server's live loop and the SkillClaw recipe read the same numbers.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from reef_cli.core.records import HarvestedSession, Record, now_iso
from reef_cli.core.reports import StoredReport, list_reports
from reef_cli.core.secrets import scan_text
from reef_cli.core.store.base import Store

WITHHELD = "[withheld: this turn held a credential]"
MAX_TURN_CHARS = 4000  # a turn is cut here: evidence, not an archive


@dataclass
class Turn:
    role: str  # user | assistant
    text: str


@dataclass
class Feedback:
    """One report on a session: its score (None: text only) and its feedback as text."""

    id: str
    score: float | None
    text: str
    created_at: str


@dataclass
class SessionEvidence:
    key: str  # "session:<id>" or "record:<receipt>"
    scenario: str
    session_id: str | None
    receipts: list[str]
    release: int | None  # the newest release its records were credited to
    first_at: str
    last_at: str
    turns: list[Turn] = field(default_factory=list)
    skills_used: list[str] = field(default_factory=list)
    reports: list[Feedback] = field(default_factory=list)
    harvested: bool = False
    withheld: int = 0  # turns withheld because they held a credential
    fingerprint: str = ""

    @property
    def score(self) -> float | None:
        """The mean reported score (None: no report gave one)."""
        scores = [r.score for r in self.reports if r.score is not None]
        return statistics.fmean(scores) if scores else None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "score": self.score}


# ------------------------------------------------------------------ turns


def _text(content: Any) -> str:
    """The plain text of a message's content (a string, or OpenAI / Anthropic parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") in ("text", "input_text", "output_text"):
                parts.append(str(part.get("text") or ""))
        return "\n".join(p for p in parts if p)
    return ""


def _last_user(request: Any) -> str:
    if not isinstance(request, dict):
        return ""
    messages = request.get("messages")
    if messages is None:  # the Responses API: ``input`` is a string or a list of items
        given = request.get("input")
        messages = [{"role": "user", "content": given}] if isinstance(given, str) else given
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            text = _text(message.get("content"))
            if text.strip() and not text.lstrip().startswith("<system-reminder>"):
                return text
    return ""


def _answer(response: Any) -> str:
    if not isinstance(response, dict):
        return ""
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return _text((choices[0].get("message") or {}).get("content"))
    output = response.get("output")  # the Responses API: message items with output_text
    if isinstance(output, list):
        parts = [
            _text(item.get("content"))
            for item in output
            if isinstance(item, dict) and item.get("type") == "message"
        ]
        return "\n".join(p for p in parts if p)
    return _text(response.get("content"))


def _turns_of_records(records: Sequence[Record]) -> list[Turn]:
    """Each request carries the whole conversation: its last user message is the new turn
    (an agent's tool-call round trips repeat it, and are not new turns)."""
    turns: list[Turn] = []
    last_asked = ""
    for record in records:
        asked = _last_user(record.request)
        if asked and asked != last_asked:
            turns.append(Turn("user", asked))
            last_asked = asked
        answered = _answer(record.response)
        if answered:
            turns.append(Turn("assistant", answered))
    return turns


def _turns_of_transcript(harvested: HarvestedSession) -> list[Turn]:
    out = []
    for turn in harvested.turns:
        role = str(turn.get("role") or "")
        text = str(turn.get("text") or "")
        if role in ("user", "assistant") and text.strip():
            out.append(Turn(role, text))
    return out


def _withhold(turns: list[Turn]) -> tuple[list[Turn], int]:
    """Turns with every credential-bearing one replaced (never sent on, never stored)."""
    out, withheld = [], 0
    for turn in turns:
        if scan_text("turn", turn.text):  # the whole turn: a cut could split a key
            out.append(Turn(turn.role, WITHHELD))
            withheld += 1
        else:
            out.append(Turn(turn.role, turn.text[:MAX_TURN_CHARS]))
    return out, withheld


def _feedback_text(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return WITHHELD if scan_text("feedback", text) else text[:MAX_TURN_CHARS]


# ------------------------------------------------------------------ sessions


def collect(store: Store, scenario: str) -> list[SessionEvidence]:
    """Every session of ``scenario``, oldest first (records of other scenarios are never
    read: the query is scoped)."""
    groups: dict[str, list[Record]] = {}
    for record in store.iter(scenario=scenario, oldest_first=True):
        if record.state == "streaming":
            continue  # not finished yet: the next run sees it whole
        if not record.is_turn:
            continue  # an embedding: nothing a person said or was answered
        key = f"session:{record.session_id}" if record.session_id else f"record:{record.id}"
        groups.setdefault(key, []).append(record)
    by_receipt: dict[str, list[StoredReport]] = {}
    for report in list_reports(store, scenario=scenario):
        for ref in report.references:
            by_receipt.setdefault(ref, []).append(report)
    out = []
    for key, records in groups.items():
        out.append(_session(store, scenario, key, records, by_receipt))
    return out


def _session(
    store: Store,
    scenario: str,
    key: str,
    records: list[Record],
    by_receipt: dict[str, list[StoredReport]],
) -> SessionEvidence:
    session_id = records[0].session_id
    transcript = _transcript(store, scenario, session_id) if session_id else None
    turns = _turns_of_transcript(transcript) if transcript else []
    if not turns:
        turns = _turns_of_records(records)
    turns, withheld = _withhold(turns)
    receipts = [r.id for r in records]
    seen: dict[str, StoredReport] = {}
    for receipt in receipts:
        for report in by_receipt.get(receipt, []):
            seen.setdefault(report.id, report)
    reports = [
        Feedback(r.id, r.score, _feedback_text(r.feedback), r.created_at)
        for r in sorted(seen.values(), key=lambda r: r.created_at)
    ]
    releases = [r.release_id for r in records if r.release_id is not None]
    evidence = SessionEvidence(
        key=key,
        scenario=scenario,
        session_id=session_id,
        receipts=receipts,
        release=max(releases) if releases else None,
        first_at=records[0].created_at,
        last_at=records[-1].created_at,
        turns=turns,
        skills_used=sorted(set(transcript.skills_used)) if transcript else [],
        reports=reports,
        harvested=transcript is not None,
        withheld=withheld,
    )
    evidence.fingerprint = fingerprint(evidence)
    return evidence


def _transcript(store: Store, scenario: str, session_id: str) -> HarvestedSession | None:
    """The agent's transcript of the session, unless it names a receipt of another
    scenario (one session id used under two scenarios): then the records alone speak."""
    harvested = store.harvested(session_id=session_id, limit=1)
    if not harvested:
        return None
    owners = set(store.exists(harvested[0].receipts).values())
    return None if owners - {scenario} else harvested[0]


def fingerprint(session: SessionEvidence) -> str:
    """Changes when the session grows: a record, a report, a longer transcript."""
    body = {
        "receipts": session.receipts,
        "reports": [r.id for r in session.reports],
        "turns": len(session.turns),
        "skills": session.skills_used,
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:32]


# ------------------------------------------------------------------ the mark


@dataclass
class Mark:
    """Which sessions a recipe already consumed, by fingerprint; kept by the store (the
    ``scenarios/<S>/<name>.json`` file on SQLite, a table that replicas share on
    PostgreSQL)."""

    store: Store
    scenario: str
    name: str
    sessions: dict[str, str] = field(default_factory=dict)
    updated_at: str | None = None

    @classmethod
    def load(cls, store: Store, scenario: str, name: str) -> Mark:
        data = store.load_mark(scenario, name) or {}  # none yet: everything is new
        sessions = data.get("sessions")
        if not isinstance(sessions, dict):
            return cls(store, scenario, name)
        found = {str(k): str(v) for k, v in sessions.items()}
        return cls(store, scenario, name, found, data.get("updated_at"))

    def new(self, sessions: Iterable[SessionEvidence]) -> list[SessionEvidence]:
        """Sessions not consumed yet, or grown since."""
        return [s for s in sessions if self.sessions.get(s.key) != s.fingerprint]

    def advance(self, sessions: Iterable[SessionEvidence]) -> None:
        """Record ``sessions`` as consumed and store the mark."""
        for session in sessions:
            self.sessions[session.key] = session.fingerprint
        self.updated_at = now_iso()
        body = {"sessions": self.sessions, "updated_at": self.updated_at}
        self.store.save_mark(self.scenario, self.name, body)


# ------------------------------------------------------------------ eligibility


@dataclass
class Eligibility:
    ready: list[SessionEvidence]  # new, scored, fresh enough
    stale: int  # new and scored, but recorded under a release too old
    unscored: int  # new, with no score yet

    def to_json(self) -> dict[str, Any]:
        return {
            "eligible": len(self.ready),
            "stale": self.stale,
            "unscored": self.unscored,
            "sessions": [s.key for s in self.ready],
        }


def is_stale(session: SessionEvidence, served: int | None, max_staleness: int | None) -> bool:
    """Recorded under a release more than ``max_staleness`` releases older than the served
    one (a session from before any release counts as release 0)."""
    if served is None or max_staleness is None:
        return False
    return served - (session.release or 0) > max_staleness


def eligibility(
    sessions: Sequence[SessionEvidence],
    mark: Mark,
    *,
    served: int | None,
    max_staleness: int | None,
) -> Eligibility:
    ready, stale, unscored = [], 0, 0
    for session in mark.new(sessions):
        if session.score is None:
            unscored += 1
        elif is_stale(session, served, max_staleness):
            stale += 1
        else:
            ready.append(session)
    return Eligibility(ready, stale, unscored)

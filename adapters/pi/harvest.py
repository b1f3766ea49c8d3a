"""Read pi's session files back as :class:`adapters.base.Session` objects.

pi writes one JSONL file per session under ``<agent dir>/sessions/--<cwd>--/``: a
``session`` header line, then entries that form a tree through ``id``/``parentId``
(format v3; v1 files have no ids and are read in order). The conversation is the path from
the leaf (the last entry written) back to the root. Reef's extension adds ``custom``
entries of type ``reef`` holding each response's receipt (``x-reef-agent-record-id``)
and the ``REEF_SESSION_ID`` the wrapper set; that id also links records Reef stored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters import _harvest
from adapters._harvest import as_utc, parse_time, touched_since
from adapters.base import Session, ToolCall, Turn

_SKILL_PATH = re.compile(r"(?:^|/)skills/([a-z0-9][a-z0-9-]*)/SKILL\.md$")
_SKILL_BLOCK = re.compile(r'<skill name="([^"]+)"')


@dataclass
class PiSession(Session):
    """A pi session (``reef_session_id``: the ``x-reef-session`` its requests carried)."""

    version: int | None = None


def _iso(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):  # message timestamps are epoch milliseconds
        return datetime.fromtimestamp(value / 1000, UTC).isoformat().replace("+00:00", "Z")
    return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def read_entries(path: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(header, entries) of one session file; unreadable lines are skipped."""
    header: dict[str, Any] | None = None
    entries: list[dict[str, Any]] = []
    for item in _harvest.read_jsonl(path):
        if item.get("type") == "session" and header is None:
            header = item
        else:
            entries.append(item)
    return header, entries


def active_path(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries from the root to the leaf (the last entry with an id), following parentId."""
    by_id = {e["id"]: e for e in entries if isinstance(e.get("id"), str)}
    if not by_id:
        return entries  # v1: a plain sequence
    leaf = next(e for e in reversed(entries) if isinstance(e.get("id"), str))
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    node: dict[str, Any] | None = leaf
    while node is not None and node["id"] not in seen:
        seen.add(node["id"])
        path.append(node)
        parent = node.get("parentId")
        node = by_id.get(parent) if isinstance(parent, str) else None
    path.reverse()
    return path


def parse_file(path: Path) -> PiSession | None:
    header, entries = read_entries(path)
    if header is None:
        return None
    session = PiSession(
        agent="pi",
        session_id=str(header.get("id") or path.stem.split("_", 1)[-1]),
        path=str(path),
        cwd=header.get("cwd"),
        started_at=_iso(header.get("timestamp")),
        version=header.get("version") if isinstance(header.get("version"), int) else None,
    )
    skills: list[str] = []
    receipts: list[str] = []
    provider_model: str | None = None
    last_time = session.started_at
    for entry in active_path(entries):
        last_time = _iso(entry.get("timestamp")) or last_time
        kind = entry.get("type")
        if kind == "model_change":
            provider_model = f"{entry.get('provider')}/{entry.get('modelId')}"
        elif kind == "custom" and entry.get("customType") == "reef":
            data = entry.get("data") or {}
            if isinstance(data, dict):
                if data.get("receipt") and data["receipt"] not in receipts:
                    receipts.append(str(data["receipt"]))
                if data.get("reef_session") and data["reef_session"] != "none":
                    session.reef_session_id = str(data["reef_session"])
        elif kind == "message":
            turn = _turn(entry, skills)
            if turn is not None:
                session.turns.append(turn)
                if turn.model:
                    provider_model = turn.model
    session.ended_at = last_time
    session.model = provider_model
    session.skills_used = skills
    session.receipts = receipts
    return session


def _turn(entry: dict[str, Any], skills: list[str]) -> Turn | None:
    message = entry.get("message")
    if not isinstance(message, dict):
        return None
    role = message.get("role")
    stamp = _iso(entry.get("timestamp")) or _iso(message.get("timestamp"))
    if role == "user":
        text = _text(message.get("content"))
        for name in _SKILL_BLOCK.findall(text):  # /skill:name expands to a <skill> block
            if name not in skills:
                skills.append(name)
        return Turn("user", text, timestamp=stamp)
    if role == "assistant":
        calls = []
        for part in message.get("content") or []:
            if isinstance(part, dict) and part.get("type") == "toolCall":
                args = part.get("arguments")
                calls.append(ToolCall(str(part.get("name")), args))
                where = args.get("path") if isinstance(args, dict) else None
                found = _SKILL_PATH.search(str(where)) if where else None
                if part.get("name") == "read" and found and found[1] not in skills:
                    skills.append(found[1])
        model = message.get("model")
        provider = message.get("provider")
        return Turn(
            "assistant",
            _text(message.get("content")),
            calls,
            timestamp=stamp,
            model=f"{provider}/{model}" if provider and model else model,
        )
    if role == "toolResult":
        return Turn("tool", _text(message.get("content")), timestamp=stamp)
    return None  # system prompt snapshots, custom messages


def session_files(sessions_dir: Path) -> list[Path]:
    if not sessions_dir.is_dir():
        return []
    return sorted(sessions_dir.glob("*/*.jsonl")) + sorted(sessions_dir.glob("*.jsonl"))


def harvest(
    sessions_dir: Path, since: datetime | None = None, link_records: bool = True
) -> list[PiSession]:
    """Every session in ``sessions_dir`` active at or after ``since``, oldest first."""
    since = as_utc(since)
    found: list[PiSession] = []
    for path in touched_since(session_files(sessions_dir), since):
        session = parse_file(path)
        if session is None:
            continue
        ended = parse_time(session.ended_at or session.started_at)
        if since is not None and ended is not None and ended < since:
            continue
        found.append(session)
    if link_records:
        link(found)
    found.sort(key=lambda s: (s.started_at or "", s.path))
    return found


def link(sessions: list[PiSession]) -> None:
    """Add receipts Reef recorded under each session's ``REEF_SESSION_ID`` (if the
    record store exists; harvesting never creates one)."""
    found = _harvest.receipts(s.reef_session_id for s in sessions if s.reef_session_id)
    for session in sessions:
        for rid in found.get(session.reef_session_id or "", []):
            if rid not in session.receipts:
                session.receipts.append(rid)

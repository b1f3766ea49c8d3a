"""Claude Code transcripts (``projects/<cwd-mangled>/<session>.jsonl``) -> ``Session``.

One JSON object per line. The entries Reef reads (Claude Code 2.1.332):

- ``{"type": "user", "message": {"role": "user", "content": str | [blocks]}, "timestamp",
  "cwd", "sessionId", "isMeta"?}`` — a prompt (text), tool results (``tool_result``
  blocks) or, with ``isMeta``, text Claude Code injected (a skill's body): skipped.
- ``{"type": "assistant", "message": {"id", "model", "content": [blocks]}, "timestamp"}``
  — one entry per content block of a streamed answer; entries sharing ``message.id`` are
  one turn. ``tool_use`` blocks are tool calls; ``Skill`` calls name the skill used.
- everything else (attachments, ``api-request``, ``cost-state``, queue operations …) is
  bookkeeping and skipped; unknown entries and broken lines are tolerated.

Receipts: Claude Code sends its session id as ``X-Claude-Code-Session-Id`` and
`reef serve` stores it with every record, so a session's receipts are the records with
that ``session_id``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters._harvest import as_utc, touched_since
from adapters.base import Session, ToolCall, Turn

AGENT = "claude-code"
_COMMAND_NAME = re.compile(r"<command-name>/?([^<\s]+)</command-name>")


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _entries(path: Path) -> Iterable[dict[str, Any]]:
    try:
        handle = path.open(encoding="utf-8", errors="replace")
    except OSError:
        return
    with handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut short by a crash: keep the rest
            if isinstance(entry, dict):
                yield entry


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(parts)
    return ""


def parse_transcript(path: Path) -> Session:
    """One transcript file -> a ``Session`` (turns in order, tool calls, skills, model)."""
    session = Session(agent=AGENT, session_id=path.stem, path=str(path))
    stamps: list[str] = []
    models: Counter[str] = Counter()
    by_message: dict[str, Turn] = {}
    skills: list[str] = []

    def used(name: str | None) -> None:
        if name and name not in skills:
            skills.append(name)

    for entry in _entries(path):
        stamp = entry.get("timestamp")
        if isinstance(stamp, str):
            stamps.append(stamp)
        if session.cwd is None and isinstance(entry.get("cwd"), str):
            session.cwd = entry["cwd"]
        if isinstance(entry.get("sessionId"), str):
            session.session_id = entry["sessionId"]
        kind = entry.get("type")
        message = entry.get("message")
        if kind not in ("user", "assistant") or not isinstance(message, dict):
            continue
        if entry.get("isSidechain"):
            continue  # a subagent's own conversation
        content = message.get("content")
        if kind == "user":
            if entry.get("isMeta"):
                continue
            if isinstance(content, list):
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        session.turns.append(
                            Turn(role="tool", text=_text_of(block.get("content")), timestamp=stamp)
                        )
            text = _text_of(content)
            if text:
                for name in _COMMAND_NAME.findall(text):
                    used(name)
                session.turns.append(Turn(role="user", text=text, timestamp=stamp))
            continue
        model = message.get("model") if isinstance(message.get("model"), str) else None
        if model and model != "<synthetic>":
            models[model] += 1
        key = str(message.get("id") or entry.get("uuid") or len(session.turns))
        turn = by_message.get(key)
        if turn is None:
            turn = Turn(role="assistant", timestamp=stamp, model=model)
            by_message[key] = turn
            session.turns.append(turn)
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and block.get("text"):
                turn.text = f"{turn.text}\n{block['text']}" if turn.text else str(block["text"])
            elif block.get("type") == "tool_use":
                args = block.get("input")
                turn.tool_calls.append(ToolCall(name=str(block.get("name")), arguments=args))
                if block.get("name") == "Skill" and isinstance(args, dict):
                    used(args.get("skill") or args.get("command"))
        if isinstance(content, str) and content:
            turn.text = content
    if stamps:
        ordered = sorted(stamps, key=lambda s: parse_time(s) or datetime.min.replace(tzinfo=UTC))
        session.started_at, session.ended_at = ordered[0], ordered[-1]
    session.model = models.most_common(1)[0][0] if models else None
    session.skills_used = skills
    return session


def transcript_files(config_dir: Path) -> list[Path]:
    """Every main-session transcript under ``config_dir/projects`` (subagents excluded)."""
    root = config_dir / "projects"
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob("*/*.jsonl") if p.is_file())


def _within(cwd: str | None, project: Path) -> bool:
    if not cwd:
        return False
    try:
        return Path(cwd).resolve().is_relative_to(project)
    except OSError:
        return False


def receipts_by_session(session_ids: list[str], store: Any = None) -> dict[str, list[str]]:
    """Record ids per session id, from Reef's record store (if there is one)."""
    if not session_ids:
        return {}
    if store is None:
        from reef_cli.core.records import RecordStore, db_path

        if not db_path().exists():
            return {}
        store = RecordStore()
    out: dict[str, list[str]] = {}
    for sid in session_ids:
        rows = store.list(session_id=sid, limit=None, oldest_first=True)
        if rows:
            out[sid] = [r.id for r in rows]
    return out


def harvest(
    config_dir: Path,
    since: datetime | None = None,
    *,
    project: Path | None = None,
    store: Any = None,
) -> list[Session]:
    """Sessions under ``config_dir`` (only those run in ``project`` if given), oldest first."""
    since = as_utc(since)
    sessions: list[Session] = []
    for path in touched_since(transcript_files(config_dir), since):
        session = parse_transcript(path)
        if project is not None and not _within(session.cwd, project.resolve()):
            continue
        ended = parse_time(session.ended_at)
        if since is not None and (ended is None or ended < since):
            continue
        if not session.turns:
            continue  # nothing but bookkeeping (e.g. a prompt a hook blocked)
        sessions.append(session)
    links = receipts_by_session([s.session_id for s in sessions], store)
    for session in sessions:
        session.receipts = links.get(session.session_id, [])
    sessions.sort(key=lambda s: parse_time(s.started_at) or datetime.min.replace(tzinfo=UTC))
    return sessions

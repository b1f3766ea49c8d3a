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

import re
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from adapters import _harvest
from adapters.base import Session, ToolCall, Turn

AGENT = "claude-code"
_COMMAND_NAME = re.compile(r"<command-name>/?([^<\s]+)</command-name>")


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
    # Claude Code sends its session id as X-Claude-Code-Session-Id: the records' session
    session = Session(agent=AGENT, session_id=path.stem, path=str(path), reef_session_id=path.stem)
    stamps: list[str] = []
    models: Counter[str] = Counter()
    by_message: dict[str, Turn] = {}
    skills: list[str] = []

    def used(name: str | None) -> None:
        if name and name not in skills:
            skills.append(name)

    for entry in _harvest.read_jsonl(path):
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
    session.started_at, session.ended_at = _harvest.span(stamps)
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


def harvest(
    config_dir: Path,
    since: datetime | None = None,
    *,
    project: Path | None = None,
    store: Any = None,
) -> list[Session]:
    """Sessions under ``config_dir`` (only those run in ``project`` if given), oldest first."""
    sessions = _harvest.active_since(transcript_files(config_dir), parse_transcript, since)
    if project is not None:
        sessions = [s for s in sessions if _within(s.cwd, project.resolve())]
    links = _harvest.receipts([s.session_id for s in sessions], store)
    for session in sessions:
        session.receipts = links.get(session.session_id, [])
    return _harvest.oldest_first(sessions)

"""opencode's session store (``opencode.db``, SQLite) -> ``Session``.

opencode 1.18.33 keeps sessions in SQLite (no JSON files under ``storage/``). The tables
Reef reads:

- ``session(id, parent_id, directory, title, model, time_created, time_updated)`` — one
  row per session; ``parent_id`` is set for a subagent's (task tool) session: skipped;
  ``model`` is ``{"id", "providerID"}`` JSON; times are epoch milliseconds.
- ``message(id, session_id, time_created, data)`` — ``data`` is JSON: ``role`` (user |
  assistant), ``providerID``/``modelID`` on assistant messages, ``model`` on user ones.
- ``part(id, message_id, session_id, time_created, data)`` — ``data.type`` ``text``
  (``synthetic`` when opencode wrote it, not the person), ``tool`` (``tool``, ``callID``,
  ``state.input``, ``state.output``/``state.error``), ``step-start``/``step-finish``,
  ``reasoning``, ``file`` …; a ``skill`` tool call names the skill it loaded.

Only sessions that used the ``reef`` provider are Reef's. Receipts: the records stored
under the session's id (`reef serve` can read opencode's ``x-session-id``) and under the
Reef session id a headless run used (``.reef/sessions.json`` maps the two).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters import _harvest
from adapters._files import STATE_DIR
from adapters._harvest import as_utc
from adapters.base import Session, ToolCall, Turn

AGENT = "opencode"
PROVIDER = "reef"
SESSION_MAP = f"{STATE_DIR}/sessions.json"


def iso(ms: Any) -> str | None:
    if not isinstance(ms, int | float) or isinstance(ms, bool):
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


def _json(text: Any) -> dict[str, Any]:
    try:
        data = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _connect(db: Path) -> sqlite3.Connection | None:
    if not db.is_file():
        return None
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        conn.execute("select 1 from session limit 1")
    except sqlite3.Error:
        return None
    return conn


def _model_of(data: dict[str, Any]) -> tuple[str | None, str | None]:
    """(provider, model) of a message: assistant ones carry them flat, user ones nested."""
    if data.get("providerID") or data.get("modelID"):
        return data.get("providerID"), data.get("modelID")
    model = data.get("model")
    if isinstance(model, dict):
        return model.get("providerID"), model.get("modelID") or model.get("id")
    return None, None


def _turns(
    messages: list[tuple[str, int, dict[str, Any]]], parts: dict[str, list[dict[str, Any]]]
) -> tuple[list[Turn], Counter[str], list[str], set[str]]:
    """(turns, models used, skills used, providers seen) of one session's messages."""
    turns: list[Turn] = []
    models: Counter[str] = Counter()
    skills: list[str] = []
    providers: set[str] = set()
    for message_id, created, data in messages:
        provider, model_id = _model_of(data)
        if provider:
            providers.add(str(provider))
        stamp = iso((data.get("time") or {}).get("created")) or iso(created)
        mine = parts.get(message_id, [])
        texts = [
            str(p.get("text", ""))
            for p in mine
            if p.get("type") == "text" and not p.get("synthetic") and p.get("text")
        ]
        if data.get("role") == "user":
            if texts:
                turns.append(Turn(role="user", text="\n".join(texts), timestamp=stamp))
            continue
        if data.get("role") != "assistant":
            continue
        name = f"{provider}/{model_id}" if provider and model_id else None
        if name:
            models[name] += 1
        turn = Turn(role="assistant", text="\n".join(texts), timestamp=stamp, model=name)
        results: list[Turn] = []
        for part in mine:
            if part.get("type") != "tool":
                continue
            raw = part.get("state")
            state: dict[str, Any] = raw if isinstance(raw, dict) else {}
            args = state.get("input")
            tool = str(part.get("tool"))
            turn.tool_calls.append(ToolCall(name=tool, arguments=args))
            named = args.get("name") if tool == "skill" and isinstance(args, dict) else None
            if named and str(named) not in skills:
                skills.append(str(named))
            if state.get("status") in ("completed", "error"):
                output = state.get("output") if state.get("status") == "completed" else None
                text = output if isinstance(output, str) else str(state.get("error") or "")
                results.append(Turn(role="tool", text=text, timestamp=stamp))
        turns.append(turn)
        turns.extend(results)
    return turns, models, skills, providers


def read_sessions(db: Path, since: datetime | None = None) -> list[Session]:
    """Reef's sessions in the store ``db`` updated at or after ``since``, oldest first."""
    conn = _connect(db)
    if conn is None:
        return []
    since = as_utc(since)
    floor = int(since.timestamp() * 1000) if since is not None else 0
    try:
        rows = conn.execute(
            "select id, directory, model, time_created, time_updated from session "
            "where parent_id is null and time_updated >= ? order by time_created, id",
            (floor,),
        ).fetchall()
        sessions = []
        for sid, directory, model, created, updated in rows:
            messages = [
                (mid, mcreated, _json(data))
                for mid, mcreated, data in conn.execute(
                    "select id, time_created, data from message where session_id = ? "
                    "order by time_created, id",
                    (sid,),
                )
            ]
            parts: dict[str, list[dict[str, Any]]] = {}
            for mid, data in conn.execute(
                "select message_id, data from part where session_id = ? order by time_created, id",
                (sid,),
            ):
                parts.setdefault(mid, []).append(_json(data))
            session = _session(db, sid, directory, model, created, updated, messages, parts)
            if session is not None:
                sessions.append(session)
        return sessions
    except sqlite3.Error:
        return []
    finally:
        conn.close()


def _session(
    db: Path,
    sid: str,
    directory: Any,
    model: Any,
    created: Any,
    updated: Any,
    messages: list[tuple[str, int, dict[str, Any]]],
    parts: dict[str, list[dict[str, Any]]],
) -> Session | None:
    turns, models, skills, providers = _turns(messages, parts)
    chosen = _json(model)
    if chosen.get("providerID"):
        providers.add(str(chosen["providerID"]))
    if PROVIDER not in providers or not turns:
        return None  # not routed through Reef, or nothing but bookkeeping
    last = max([updated, *(m[1] for m in messages)], key=lambda v: v or 0)
    fallback = (
        f"{chosen['providerID']}/{chosen['id']}"
        if chosen.get("providerID") and chosen.get("id")
        else None
    )
    return Session(
        agent=AGENT,
        session_id=str(sid),
        path=f"{db}#{sid}",
        cwd=str(directory) if directory else None,
        started_at=iso(created),
        ended_at=iso(last),
        model=models.most_common(1)[0][0] if models else fallback,
        turns=turns,
        skills_used=skills,
    )


def session_map(target: Path) -> dict[str, str]:
    """opencode session id -> the Reef session id a headless run sent (``SESSION_MAP``)."""
    try:
        data = json.loads((target / SESSION_MAP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def remember(target: Path, opencode_id: str, reef_id: str) -> None:
    from reef_cli.core.fsutil import atomic_write_text

    known = session_map(target)
    known[opencode_id] = reef_id
    atomic_write_text(target / SESSION_MAP, json.dumps(known, indent=2) + "\n")


def harvest(
    db: Path,
    since: datetime | None = None,
    *,
    mapping: dict[str, str] | None = None,
    store: Any = None,
) -> list[Session]:
    """Sessions in ``db`` with their receipts (under their own id, and under the Reef
    session id ``mapping`` names for them), oldest first."""
    sessions = read_sessions(db, since)
    mapping = mapping or {}
    wanted = [s.session_id for s in sessions] + [
        mapping[s.session_id] for s in sessions if s.session_id in mapping
    ]
    found = _harvest.receipts(wanted, store)
    for session in sessions:
        ids = found.get(session.session_id, [])
        if session.session_id in mapping:
            ids = ids + found.get(mapping[session.session_id], [])
        session.receipts = list(dict.fromkeys(ids))
    return sessions

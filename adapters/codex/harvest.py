"""Codex rollouts (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``) -> ``Session``.

One JSON object per line, ``{"timestamp", "type", "payload"}`` (Codex 0.171.0). What Reef
reads:

- ``session_meta``: ``payload.id`` (the session id, also in the file name), ``cwd``,
  ``timestamp``, ``cli_version``, ``model_provider``;
- ``turn_context``: ``payload.model`` (the model of each turn);
- ``response_item`` — the conversation as Codex sends it to the model:
  ``message`` (``role`` user / assistant / developer; content parts ``input_text`` /
  ``output_text``), ``function_call`` (``name``, ``arguments`` as a JSON string,
  ``call_id``), ``function_call_output`` (``output``), ``custom_tool_call`` (``name``,
  ``input``) and its ``custom_tool_call_output``; ``reasoning`` is skipped;
- everything else (``event_msg``, ``world_state``, ``token_usage_record`` …) is bookkeeping.

Codex injects context as user messages too (``# AGENTS.md instructions``,
``<environment_context>``, a mentioned skill's body); the person's own text is the part
whose ``content_item_metadata`` provenance is ``user`` (and, in rollouts without that
metadata, every part that is not such an injected block). A prompt a hook blocked leaves
no user message, so that session has no turns and is not harvested.

Receipts: Reef's records carry the Reef session id (``x-reef-session``), not Codex's;
Codex puts its own session id into every request body (``prompt_cache_key`` and
``client_metadata.session_id``), so a session's receipts are the records whose request
names it, plus any record filed under the Codex session id itself. The Reef session id
those records carry is the session's ``reef_session_id`` (what `reef sessions` joins on).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from adapters import _harvest
from adapters._harvest import parse_time
from adapters.base import Session, ToolCall, Turn

AGENT = "codex"
_INJECTED = ("# AGENTS.md instructions", "<environment_context>", "<user_instructions>")
_INJECTED_TAG = re.compile(r"^<(skill|skills_instructions|turn_aborted|user_shell_command)\b")
_FILE_ID = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$")
_SKILL_BLOCK = re.compile(r"^\s*<skill>\s*<name>([^<]+)</name>")
_SKILL_READ = re.compile(r"skills/([^/\s\"']+)/SKILL\.md")


def _entries(path: Path) -> Iterator[dict[str, Any]]:
    return (e for e in _harvest.read_jsonl(path) if isinstance(e.get("payload"), dict))


def _injected(text: str) -> bool:
    head = text.lstrip()
    return head.startswith(_INJECTED) or bool(_INJECTED_TAG.match(head))


def _user_text(item: dict[str, Any]) -> str:
    """The person's own text in a user message (injected context left out)."""
    parts = [p for p in item.get("content") or [] if isinstance(p, dict)]
    meta = item.get("internal_chat_message_metadata_passthrough")
    provenance = meta.get("content_item_metadata") if isinstance(meta, dict) else None
    texts: list[str] = []
    for index, part in enumerate(parts):
        text = part.get("text")
        if part.get("type") != "input_text" or not isinstance(text, str):
            continue
        if isinstance(provenance, list) and len(provenance) == len(parts):
            origin = provenance[index] if isinstance(provenance[index], dict) else {}
            source = origin.get("provenance")
            if not (isinstance(source, dict) and source.get("type") == "user"):
                continue
        elif _injected(text):
            continue
        texts.append(text)
    return "\n".join(texts)


def _output_text(item: dict[str, Any]) -> str:
    return "\n".join(
        str(p.get("text", ""))
        for p in item.get("content") or []
        if isinstance(p, dict) and p.get("type") == "output_text"
    )


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _tool_output(raw: Any) -> str:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict) and isinstance(raw.get("content"), str):
        return str(raw["content"])
    if isinstance(raw, list):  # content items
        return "\n".join(str(p.get("text", "")) for p in raw if isinstance(p, dict))
    return "" if raw is None else json.dumps(raw)


def _skills_in(item: dict[str, Any]) -> list[str]:
    """Skills Codex injected into a user message (``<skill><name>N</name>…``: the person
    typed ``$N``)."""
    found = []
    for part in item.get("content") or []:
        text = part.get("text") if isinstance(part, dict) else None
        hit = _SKILL_BLOCK.match(text) if isinstance(text, str) else None
        if hit:
            found.append(hit.group(1).strip())
    return found


def parse_rollout(path: Path) -> Session:
    """One rollout file -> a ``Session``: turns in order, tool calls, the model, and the
    skills used (injected for a ``$name`` mention, or read by the model's tool calls)."""
    match = _FILE_ID.search(path.stem)
    sid = match.group(1) if match else path.stem
    session = Session(agent=AGENT, session_id=sid, path=str(path))
    stamps: list[str] = []
    models: Counter[str] = Counter()
    model: str | None = None
    used: list[str] = []
    for entry in _entries(path):
        stamp = entry.get("timestamp") if isinstance(entry.get("timestamp"), str) else None
        if stamp:
            stamps.append(stamp)
        kind, payload = entry.get("type"), entry["payload"]
        if kind == "session_meta":
            if isinstance(payload.get("id"), str):
                session.session_id = payload["id"]
            if session.cwd is None and isinstance(payload.get("cwd"), str):
                session.cwd = payload["cwd"]
            continue
        if kind == "turn_context":
            model = payload.get("model") if isinstance(payload.get("model"), str) else model
            continue
        if kind != "response_item":
            continue
        item_type = payload.get("type")
        last = session.turns[-1] if session.turns else None
        if item_type == "message" and payload.get("role") == "user":
            used.extend(n for n in _skills_in(payload) if n not in used)
            text = _user_text(payload)
            if text:
                session.turns.append(Turn(role="user", text=text, timestamp=stamp))
        elif item_type == "message" and payload.get("role") == "assistant":
            text = _output_text(payload)
            if model:
                models[model] += 1
            if last is not None and last.role == "assistant" and not last.text:
                last.text = text  # a message after this answer's tool calls
            else:
                session.turns.append(Turn("assistant", text, timestamp=stamp, model=model))
        elif item_type in ("function_call", "custom_tool_call"):
            args = _arguments(payload.get("arguments", payload.get("input")))
            call = ToolCall(name=str(payload.get("name")), arguments=args)
            for name in _SKILL_READ.findall(json.dumps(args)):
                if name not in used and not name.startswith("."):
                    used.append(name)
            if last is not None and last.role == "assistant":
                last.tool_calls.append(call)
            else:
                if model:
                    models[model] += 1
                session.turns.append(Turn("assistant", "", [call], timestamp=stamp, model=model))
        elif item_type in ("function_call_output", "custom_tool_call_output"):
            session.turns.append(
                Turn(role="tool", text=_tool_output(payload.get("output")), timestamp=stamp)
            )
    session.started_at, session.ended_at = _harvest.span(stamps)
    session.model = models.most_common(1)[0][0] if models else model
    session.skills_used = used
    return session


def rollout_files(codex_home: Path) -> list[Path]:
    """Every rollout under ``codex_home/sessions`` (archived sessions are left out)."""
    root = codex_home / "sessions"
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob("*/*/*/rollout-*.jsonl") if p.is_file())


def _named_session(request: Any) -> str | None:
    """The Codex session a recorded Responses request came from (its body names it)."""
    if not isinstance(request, dict):
        return None
    meta = request.get("client_metadata")
    if isinstance(meta, dict) and isinstance(meta.get("session_id"), str):
        return str(meta["session_id"])
    key = request.get("prompt_cache_key")
    return key if isinstance(key, str) else None


def receipts_by_session(
    sessions: list[Session], store: Any = None, scenario: str | None = None
) -> dict[str, list[tuple[str, str | None]]]:
    """``(record id, Reef session id)`` per Codex session id, oldest first: one pass over
    the records made since the oldest session started (``scenario``'s only, when given)."""
    wanted = {s.session_id for s in sessions}
    if not wanted:
        return {}
    starts = [t for t in (parse_time(s.started_at) for s in sessions) if t is not None]
    early = (min(starts) - timedelta(seconds=5)).astimezone(UTC) if starts else None
    since = early.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if early else None  # records' format
    out: dict[str, list[tuple[str, str | None]]] = {}
    with _harvest.record_store(store) as records:
        if records is None:
            return {}
        for record in records.iter(scenario=scenario, since=since, oldest_first=True):
            sid = record.session_id if record.session_id in wanted else None
            sid = sid or _named_session(record.request)
            if sid in wanted:
                out.setdefault(str(sid), []).append((record.id, record.session_id))
    return out


def harvest(
    codex_home: Path,
    since: datetime | None = None,
    *,
    scenario: str | None = None,
    store: Any = None,
) -> list[Session]:
    """Sessions under ``codex_home`` active since ``since``, oldest first, with receipts."""
    sessions = _harvest.active_since(rollout_files(codex_home), parse_rollout, since)
    links = receipts_by_session(sessions, store, scenario)
    for session in sessions:
        found = links.get(session.session_id, [])
        session.receipts = [rid for rid, _ in found]
        reef = Counter(sid for _, sid in found if sid)
        session.reef_session_id = reef.most_common(1)[0][0] if reef else None
    return _harvest.oldest_first(sessions)

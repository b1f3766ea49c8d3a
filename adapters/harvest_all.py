"""Bring the agents' own transcripts into Reef's records store (`reef sessions harvest`).

Which folders: one named target, or every target in the install ledger plus the folders
the wrappers own (``$REEF_HOME/agents/<adapter>-<scenario>``). Each session becomes one
``harvested_sessions`` row (see :mod:`reef_cli.core.records`); harvesting again replaces
it. A transcript line that is not JSON is skipped and counted; a folder that cannot be
read is reported and the others are still harvested. ``overview`` and ``detail`` join
harvested sessions with the records that share their session id, for
`reef sessions list|show`.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters.base import Session
from reef_cli.core import agents
from reef_cli.core.errors import ReefError
from reef_cli.core.records import HarvestedSession
from reef_cli.core.store import Store, open_store


@dataclass
class TargetResult:
    adapter: str
    target: str
    sessions: int = 0
    linked: int = 0
    skipped_lines: int = 0
    error: str | None = None


@dataclass
class HarvestResult:
    targets: list[TargetResult] = field(default_factory=list)

    @property
    def stored(self) -> int:
        return sum(t.sessions for t in self.targets)

    @property
    def linked(self) -> int:
        return sum(t.linked for t in self.targets)

    @property
    def skipped_lines(self) -> int:
        return sum(t.skipped_lines for t in self.targets)

    def to_json(self) -> dict[str, Any]:
        return {
            "stored": self.stored,
            "linked": self.linked,
            "skipped_lines": self.skipped_lines,
            "targets": [asdict(t) for t in self.targets],
        }


# ---------------------------------------------------------------- input


def parse_since(text: str | None) -> datetime | None:
    """``2025-01-31`` or an ISO time (``Z`` allowed) -> an aware datetime (UTC if none)."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ReefError(
            f"--since {text!r} is not an ISO date or time", "e.g. --since 2025-01-31T09:00Z"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def adapter_name(name: str) -> str:
    """The canonical adapter name (``claude`` -> ``claude-code``); ReefError if unknown."""
    return agents.get(name).name


def _guess_adapter(target: Path) -> str:
    """The agent ``target`` belongs to: the one its install manifest names, else the one
    whose marks (``Agent.marks``) it has — a file first (Codex keeps config.toml beside its
    sessions/, opencode its opencode.json(c) or its database), then a folder (pi only
    has sessions/, Claude Code projects/)."""
    from adapters import _files

    rows = agents.registered()
    manifest = _files.load_manifest(target)
    if manifest and manifest.get("adapter") in {agent.name for agent in rows}:
        return str(manifest["adapter"])
    for folders in (False, True):
        for agent in rows:
            for mark in agent.marks:
                if mark.endswith("/") != folders:
                    continue
                where = target / mark.rstrip("/")
                if where.is_dir() if folders else where.is_file():
                    return agent.name
    raise ReefError(
        f"cannot tell which agent {target} belongs to",
        f"pass --adapter with one of: {', '.join(agent.name for agent in rows)}",
    )


def targets(adapter: str | None = None) -> list[tuple[str, Path]]:
    """``(adapter, folder)`` for every install in the ledger and every wrapper-owned
    folder, existing ones only, each once."""
    from reef_cli.core import installs, paths

    found: list[tuple[str, Path]] = []
    for install in installs.all_installs():
        found.append((install.adapter, Path(install.target)))
    owned = paths.agents_dir()
    if owned.is_dir():
        for folder in sorted(owned.iterdir()):
            for name in sorted(agents.names(), key=len, reverse=True):  # longest prefix first
                if folder.is_dir() and folder.name.startswith(name + "-"):
                    found.append((name, folder))
                    break
    out: list[tuple[str, Path]] = []
    seen: set[tuple[str, str]] = set()
    for name, where in found:
        if adapter is not None and name != adapter:
            continue
        key = (name, str(where.expanduser().absolute()))
        if key in seen or not where.is_dir():
            continue
        seen.add(key)
        out.append((name, where))
    return out


# ---------------------------------------------------------------- harvesting


def bad_lines(path: Path) -> int:
    """Non-empty lines of a transcript that are not a JSON object (the parsers skip them)."""
    count = 0
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except ValueError:
                    count += 1
                    continue
                if not isinstance(item, dict):
                    count += 1
    except OSError:
        return 0
    return count


def to_row(session: Session) -> HarvestedSession:
    turns = [asdict(t) for t in session.turns]
    return HarvestedSession(
        agent=session.agent,
        session_id=session.session_id,
        path=session.path,
        record_session_id=session.reef_session_id,
        cwd=session.cwd,
        started_at=session.started_at,
        ended_at=session.ended_at,
        model=session.model,
        turns=turns,
        skills_used=list(session.skills_used),
        receipts=list(session.receipts),
    )


def harvest_target(
    adapter: str, target: Path, since: datetime | None, store: Store
) -> TargetResult:
    """Harvest one folder into ``store``; errors reading it end up in ``.error``."""
    import adapters

    result = TargetResult(adapter, str(target))
    try:
        sessions = adapters.get(adapter).harvest(target, since)
        rows = [to_row(s) for s in sessions]
        json.dumps([asdict(r) for r in rows], default=str)  # fail here, not mid-write
    except (OSError, ValueError, UnicodeError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        return result
    result.skipped_lines = sum(bad_lines(Path(s.path)) for s in sessions)
    result.sessions = store.upsert_harvested(rows)
    known = store.exists([r for row in rows for r in row.receipts])
    result.linked = sum(1 for row in rows if any(r in known for r in row.receipts))
    return result


def harvest(
    adapter: str | None = None,
    target: Path | None = None,
    since: datetime | None = None,
    store: Store | None = None,
) -> HarvestResult:
    """Harvest ``target`` (with ``adapter`` or the one installed there), or every known
    target (of ``adapter`` if given). Unknown adapter / missing target: ReefError."""
    name = adapter_name(adapter) if adapter is not None else None
    if target is not None:
        where = target.expanduser()
        if not where.is_dir():
            raise ReefError(
                f"target {target} does not exist or is not a folder",
                "pass the agent's folder, e.g. --target ~/.pi/agent",
            )
        plan = [(name or _guess_adapter(where), where)]
    else:
        plan = targets(name)
    own = store is None
    store = store or open_store()
    try:
        result = HarvestResult()
        for agent, where in plan:
            result.targets.append(harvest_target(agent, where, since, store))
        if target is not None and result.targets[0].error:
            raise ReefError(
                f"cannot harvest {target}: {result.targets[0].error}",
                "check the folder's permissions and contents",
            )
        return result
    finally:
        if own:
            store.close()


# ---------------------------------------------------------------- reading back


def overview(store: Store, scenario: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
    """Recent sessions, newest first: record sessions and harvested transcripts joined on
    the session id the records carry. ``has_records`` / ``harvested`` say which is which."""
    rows: dict[str, dict[str, Any]] = {}
    for s in store.sessions(scenario=scenario, limit=limit):
        rows[s["session_id"]] = {
            **s,
            "agent": None,
            "harvested": False,
            "transcript_id": None,
            "turns": None,
            "has_records": True,
        }
    harvested = store.harvested(limit=limit)
    missing = [
        h.record_session_id
        for h in harvested
        if h.record_session_id and h.record_session_id not in rows
    ]
    for s in store.sessions_by_id(missing):
        if scenario is None or s["scenario"] == scenario:
            rows.setdefault(
                s["session_id"],
                {**s, "harvested": False, "has_records": True, "transcript_id": None},
            )
    for h in harvested:
        key = h.record_session_id or h.session_id
        if key in rows:
            row = rows[key]
        elif scenario is not None:
            continue  # a transcript without records has no scenario
        else:
            row = rows[key] = {
                "session_id": key,
                "scenario": None,
                "records": 0,
                "started_at": h.started_at or "",
                "last_at": h.ended_at or h.started_at or "",
                "input_tokens": 0,
                "output_tokens": 0,
                "has_records": False,
            }
        row.update(agent=h.agent, harvested=True, transcript_id=h.session_id, turns=len(h.turns))
    ordered = sorted(rows.values(), key=lambda r: r.get("last_at") or "", reverse=True)
    return ordered[:limit]


def summary(item: HarvestedSession) -> dict[str, Any]:
    """Turn counts by role, tool calls by name, skills used, receipts."""
    roles = Counter(str(t.get("role")) for t in item.turns)
    calls: Counter[str] = Counter()
    for turn in item.turns:
        for call in turn.get("tool_calls") or []:
            if isinstance(call, dict):
                calls[str(call.get("name"))] += 1
    return {
        "agent": item.agent,
        "session_id": item.session_id,
        "record_session_id": item.record_session_id,
        "path": item.path,
        "cwd": item.cwd,
        "model": item.model,
        "started_at": item.started_at,
        "ended_at": item.ended_at,
        "turns": len(item.turns),
        "turns_by_role": dict(roles),
        "tool_calls": dict(calls),
        "skills_used": list(item.skills_used),
        "receipts": list(item.receipts),
        "harvested_at": item.harvested_at,
    }


def detail(store: Store, session_id: str) -> tuple[list[Any], list[HarvestedSession]]:
    """The records of ``session_id`` (oldest first) and its harvested transcripts; the id
    may be the records' session id or an agent's own (pi's transcript id)."""
    transcripts = store.harvested(session_id=session_id)
    records = store.list(session_id=session_id, limit=None, oldest_first=True)
    if not records:
        for item in transcripts:
            if item.record_session_id and item.record_session_id != session_id:
                records = store.list(
                    session_id=item.record_session_id, limit=None, oldest_first=True
                )
                if records:
                    break
    return records, transcripts

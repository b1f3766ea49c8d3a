"""The live loop's per-scenario state (``scenarios/<S>/learning.json``) and the numbers it
decides on.

`reef serve` writes the file whenever a check changes it; `reef scenario status` and
``GET /reef/scenarios/{s}/learning`` read it, so what the loop did is visible without a
server and survives one. The counts are ``core.evidence``'s: the same eligibility the
recipe reads (mark name = the recipe's name).

Counting sessions parses every record of a scenario (about 0.1 ms a record), so the loop
does not recount on every poll: :func:`probe` is a handful of indexed SQL aggregates that
change whenever anything a count depends on changes (records, reports, harvested
transcripts, the chain, the mark), and :func:`scored_sessions` bounds how many sessions
could be eligible at all. A scenario with fewer scored sessions than ``batch_size``
cannot trigger a run, so a large one is not recounted until it could.
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reef_cli.core import evidence, scenarios
from reef_cli.core.fsutil import atomic_write_text
from reef_cli.core.store.base import Store

STATE_FILE = "learning.json"
TASKS_FILE = "tasks.yaml"  # recipes.tasks.loading.TASKS_FILE: a scenario's own task set


@dataclass
class LastRun:
    """One run the loop started: its job and how it ended (``state`` is the job's)."""

    job: str
    recipe: str
    started: str
    state: str = "queued"
    ended: str | None = None
    message: str = ""
    release: int | None = None
    sessions: int = 0  # eligible sessions when it was triggered
    # {session key: fingerprint} the run was triggered by: the mark advances over these
    # when the recipe keeps no mark of its own (gepa)
    batch: dict[str, str] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("batch")
        return data


@dataclass
class LearningState:
    scenario: str
    recipe: str | None = None
    checked_at: str | None = None
    # eligible, stale, unscored (core.evidence), scored_sessions (an upper bound on
    # eligible, from SQL), served (release), counted_at (when the full count ran),
    # counted_sessions (the scored sessions that full count, and the trigger after it, saw)
    counts: dict[str, Any] = field(default_factory=dict)
    last_run: LastRun | None = None
    # {"waits_for": sessions | interval | retry | job | tasks | train | count | replica | runner |
    #  nothing,
    #  "at": iso | None, "detail": one line}
    next_trigger: dict[str, Any] = field(default_factory=dict)
    runs: int = 0
    last_error: str | None = None  # the class name of the last check's error, if any
    config: dict[str, Any] = field(default_factory=dict)  # the loop's settings, as run

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["last_run"] = self.last_run.summary() if self.last_run else None
        return data


def _fits(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        return any(_fits(value, arg) for arg in typing.get_args(hint))
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    return isinstance(value, origin or hint)


def _typed(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``data`` that ``cls`` has, of the type it declares: a hand-edited
    state file's wrong value falls back to the default instead of failing a reader."""
    hints = typing.get_type_hints(cls)
    return {k: v for k, v in data.items() if k in hints and k != "last_run" and _fits(v, hints[k])}


def state_path(scenario_dir: Path) -> Path:
    return scenario_dir / STATE_FILE


def load(scenario_dir: Path) -> LearningState | None:
    """The state file, or None when no live loop ever checked this scenario (an unreadable
    file reads as none: the next check rewrites it)."""
    try:
        data = json.loads(state_path(scenario_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    run = data.get("last_run")
    last: LastRun | None = None
    if isinstance(run, dict):
        try:
            last = LastRun(**_typed(LastRun, run))
        except TypeError:
            last = None
    known = _typed(LearningState, data)
    known["last_run"] = last
    known.setdefault("scenario", scenario_dir.name)
    try:
        return LearningState(**known)
    except TypeError:
        return None


def save(scenario_dir: Path, state: LearningState) -> None:
    """Write the state atomically, 0600 (the batch keeps session keys, never their text)."""
    data = asdict(state)
    atomic_write_text(
        state_path(scenario_dir), json.dumps(data, indent=1, sort_keys=True) + "\n", 0o600
    )


# ------------------------------------------------------------------ counting


def count(
    store: Store,
    scenario: str,
    scenario_dir: Path,
    mark_name: str,
    served: int | None,
    max_staleness: int | None,
) -> evidence.Eligibility:
    """The full count: ``core.evidence`` over every session of the scenario."""
    sessions = evidence.collect(store, scenario)
    mark = evidence.Mark.load(store, scenario, mark_name)
    return evidence.eligibility(sessions, mark, served=served, max_staleness=max_staleness)


def probe(store: Store, scenario: str, scenario_dir: Path, mark_name: str) -> list[Any]:
    """Changes whenever a count of ``scenario`` could: a new record or report of it (the
    newest ``created_at`` of each: an index seek, not a scan), a harvested transcript, the
    chain ref (a publish changes what is stale) and the mark (a run consumed sessions).
    A streamed record that completes in place is seen with the next change (its report,
    which scoring needs anyway)."""
    return [
        *store.probe(scenario),
        scenarios.chain_key(scenarios.chain_ref_files(scenario_dir / scenarios.CHAIN_DIR)),
        store.mark_version(scenario, mark_name),
    ]


def traffic_scenarios(store: Store) -> list[str]:
    """Scenarios with at least one record (the loop's default set)."""
    return [s.name for s in scenarios.list_all() if store.has_records(s.name)]


# ------------------------------------------------------------------ time


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    for fmt in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# ------------------------------------------------------------------ the shown view


def view(
    scenario: str,
    state: LearningState | None,
    *,
    enabled: bool,
    config: dict[str, Any] | None,
) -> dict[str, Any]:
    """What ``GET /reef/scenarios/{s}/learning`` and `reef scenario status --json` show:
    the counts at the last check, the last run and its outcome, the next trigger and the
    loop's settings (``config``: the running server's, else those of the last check)."""
    data = state.to_json() if state is not None else {}
    return {
        "scenario": scenario,
        "enabled": enabled,
        "has_run": state is not None,
        "config": config if config is not None else (data.get("config") or None),
        "recipe": (config or {}).get("recipe") or data.get("recipe"),
        "checked_at": data.get("checked_at"),
        "counts": data.get("counts") or {},
        "last_run": data.get("last_run"),
        "next_trigger": data.get("next_trigger") or None,
        "runs": data.get("runs", 0),
        "last_error": data.get("last_error"),
    }

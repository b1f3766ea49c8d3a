"""Records: one recorded inference exchange each — the data model every store keeps.

A record is written whole, in one transaction, so a crash leaves either no row or a whole
one. A row's ``state`` says how far the exchange got: ``streaming`` (a stream still
running: the row exists from its first byte, without a response yet), ``complete``, or
``interrupted`` (the server stopped before the exchange finished; the response holds what
had been sent). Writes never move a row back (``complete`` is not replaced by
``interrupted``, nor either by ``streaming``). Sessions are not a table: they are the
records that share a ``session_id``. A :class:`HarvestedSession` is what an agent's own
transcript says about a session (turns, tool calls, skills, receipts), one per
``(agent, session_id)``; harvesting again replaces it whole.

Where records live is ``reef_cli.core.store``'s business (SQLite by default, PostgreSQL for
a team); this module is the shape of a row and its encoding, shared by both backends.
Importable without the server stack (stdlib only).
"""

from __future__ import annotations

import builtins
import contextlib
import json
import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reef_cli.core import paths
from reef_cli.core.clock import now_iso
from reef_cli.core.compact_json import unicode_compact
from reef_cli.core.errors import ReefError

DB_NAME = "records.sqlite3"


class RecordNotFound(ReefError):
    """No record has that receipt id."""

    http_status = 404


def db_path() -> Path:
    return paths.state_dir() / DB_NAME


def new_receipt() -> str:
    """A receipt id: ``rec_`` + 24 hex digits (96 random bits)."""
    return "rec_" + secrets.token_hex(12)


# The client dialect of an embeddings exchange (POST /v1/embeddings): recorded with a
# receipt like any other, but no turn of a conversation, so no learner reads it.
EMBEDDINGS = "embeddings"


@dataclass
class Record:
    id: str
    scenario: str
    client_dialect: str
    upstream_dialect: str
    release_id: int | None = None
    session_id: str | None = None
    model: str | None = None
    stream: bool = False
    request: Any = None
    response: Any = None
    usage: dict[str, Any] | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_ms: float | None = None
    first_chunk_ms: float | None = None
    status: int | None = None
    error: str | None = None
    created_at: str = field(default_factory=now_iso)
    # streaming | complete | interrupted (see the module docstring)
    state: str = "complete"
    # the release the server served when the request came; ``release_id`` is the one the
    # record is credited to: the client's ``x-reef-release-id`` when valid, else this one
    served_release_id: int | None = None
    # why a client's x-reef-release-id was not used (None when it was, or none came)
    release_note: str | None = None
    # reefd: the engine's weight version when the request came (None: no reefd), and why
    # the record cannot train that version (it spanned a swap, the engine was inconsistent)
    weight_version: str | None = None
    weight_note: str | None = None
    # what the engine returned of its tokens (non-streamed answers only): {"prompt": [...],
    # "response": [...]} and the response tokens' logprobs; streamed records are re-tokenized
    token_ids: dict[str, Any] | None = None
    logprobs: list[float] | None = None
    # the request's x-reef-tag-<name> headers, {name: value} (None: it sent none)
    tags: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def is_turn(self) -> bool:
        """A turn of a conversation (chat, Messages, Responses), not an embedding."""
        return self.client_dialect != EMBEDDINGS

    def summary(self) -> dict[str, Any]:
        data = self.to_json()
        data.pop("request")
        data.pop("response")
        return data


RECORD_COLUMNS = [
    "id",
    "scenario",
    "release_id",
    "session_id",
    "client_dialect",
    "upstream_dialect",
    "model",
    "stream",
    "request",
    "response",
    "usage",
    "input_tokens",
    "output_tokens",
    "latency_ms",
    "first_chunk_ms",
    "status",
    "error",
    "created_at",
    "state",
    "served_release_id",
    "release_note",
    "weight_version",
    "weight_note",
    "token_ids",
    "logprobs",
    "tags",
]
JSON_COLUMNS = {"request", "response", "usage", "token_ids", "logprobs", "tags"}


_STATE_RANK = {"streaming": 0, "interrupted": 1, "complete": 2}


def state_rank(state: str) -> int:
    """How far an exchange got: a write never replaces a row with a lower rank."""
    return _STATE_RANK.get(state, 0)


class RawJSON(str):
    """Text that is already JSON: stored as is, without decoding and re-encoding."""


def _dump(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, RawJSON):
        return str(value)
    return unicode_compact(value)


def record_values(rec: Record) -> tuple[Any, ...]:
    out: list[Any] = []
    for col in RECORD_COLUMNS:
        value = getattr(rec, col)
        if col in JSON_COLUMNS:
            value = _dump(value)
        elif col == "stream":
            value = int(bool(value))
        out.append(value)
    return tuple(out)


def record_from_row(row: Mapping[str, Any]) -> Record:
    data = {col: row[col] for col in RECORD_COLUMNS}
    for col in JSON_COLUMNS:
        if data[col] is not None:
            with contextlib.suppress(ValueError):
                data[col] = json.loads(data[col])
    data["stream"] = bool(data["stream"])
    return Record(**data)


@dataclass
class HarvestedSession:
    """One agent session as read from the agent's transcript (``reef sessions harvest``).

    ``record_session_id`` is the session id Reef's records carry for it (pi: the
    wrapper's ``REEF_SESSION_ID``; Claude Code: its own session id)."""

    agent: str
    session_id: str
    path: str
    record_session_id: str | None = None
    cwd: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    model: str | None = None
    turns: builtins.list[dict[str, Any]] = field(default_factory=builtins.list)
    skills_used: builtins.list[str] = field(default_factory=builtins.list)
    receipts: builtins.list[str] = field(default_factory=builtins.list)
    harvested_at: str = field(default_factory=now_iso)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


HARVEST_COLUMNS = [
    "agent",
    "session_id",
    "record_session_id",
    "path",
    "cwd",
    "started_at",
    "ended_at",
    "model",
    "turns",
    "skills_used",
    "receipts",
    "harvested_at",
]
HARVEST_JSON = {"turns", "skills_used", "receipts"}


def harvest_values(item: HarvestedSession) -> tuple[Any, ...]:
    values: list[Any] = []
    for col in HARVEST_COLUMNS:
        value = getattr(item, col)
        if col in HARVEST_JSON:
            value = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
        values.append(value)
    return tuple(values)


def harvest_from_row(row: Mapping[str, Any]) -> HarvestedSession:
    data = {col: row[col] for col in HARVEST_COLUMNS}
    for col in HARVEST_JSON:
        try:
            loaded = json.loads(data[col])
        except (TypeError, ValueError):
            loaded = []
        data[col] = loaded if isinstance(loaded, builtins.list) else []
    return HarvestedSession(**data)


def where_clause(*conditions: tuple[str, Any]) -> tuple[str, list[Any]]:
    """``WHERE …`` joining the SQL fragments whose value is not None, and their arguments
    (every ``?`` of a fragment takes its value); empty when no value is set."""
    clauses: list[str] = []
    args: list[Any] = []
    for fragment, value in conditions:
        if value is not None:
            clauses.append(fragment)
            args += [value] * fragment.count("?")
    return ("WHERE " + " AND ".join(clauses) if clauses else ""), args

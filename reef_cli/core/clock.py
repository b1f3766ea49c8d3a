"""The one timestamp format Reef writes (records, releases, installs, jobs): UTC, ISO 8601
with microseconds and a ``Z``. A module of its own so that needing the time imports no
store and no release chain."""

from __future__ import annotations

from datetime import UTC, datetime


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

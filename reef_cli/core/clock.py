"""The one timestamp format Reef writes (records, releases, installs, jobs): UTC, ISO 8601
with microseconds and a ``Z``. A module of its own so that needing the time imports no
store and no release chain."""

from __future__ import annotations

from datetime import UTC, datetime


def now_iso() -> str:
    return iso(datetime.now(UTC))


def iso(moment: datetime) -> str:
    """``moment`` (UTC) as Reef writes it. isoformat is C all the way: strftime with
    ``%Y-%m-%dT%H:%M:%S.%fZ`` gives the same text at nearly twice the cost, and every
    proxied request stamps one (its record's ``created_at``)."""
    return moment.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"

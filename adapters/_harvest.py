"""What both adapters' harvests share: which transcript files changed since a moment."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path


def as_utc(moment: datetime | None) -> datetime | None:
    """A naive ``since`` is taken as UTC."""
    if moment is not None and moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment


def touched_since(files: Iterable[Path], since: datetime | None) -> Iterator[Path]:
    """``files`` modified at or after ``since`` (all of them when it is None); a file that
    vanished or cannot be read is skipped."""
    for path in files:
        if since is not None:
            try:
                if datetime.fromtimestamp(path.stat().st_mtime, UTC) < since:
                    continue
            except OSError:
                continue
        yield path

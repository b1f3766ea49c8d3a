"""Which records may train the current weights, and why the others may not.

A record trains only when it is whole (state ``complete``, status 200), no note says it
spanned a swap or came from an inconsistent engine, and its weights are at most
``max_staleness`` versions behind the ones being trained. An off-policy recipe (SFT:
``max_staleness=None``) needs only the first: an accepted answer is a demonstration
whichever weights, or whichever model behind a plain `reef serve`, wrote it. Every
record left out is counted by reason, so `reefd status` can say what was dropped and why.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from reef_cli.core.errors import ConfigError
from reef_cli.core.records import Record
from reef_cli.core.weight_version import INCONSISTENT

BASE = "base"
_RELEASE = re.compile(r"^w([0-9]+)$")


def number(version: str) -> int:
    """``"base"`` -> 0, ``"w3"`` -> 3: versions are ordered by release number."""
    if version == BASE:
        return 0
    match = _RELEASE.match(version)
    if match is None:
        raise ConfigError(
            f"not a weight version: {version!r}", "weight versions are 'base' or 'w<N>'"
        )
    return int(match.group(1))


def _number_or_none(version: str | None) -> int | None:
    if version is None:
        return None
    try:
        return number(version)
    except ConfigError:
        return None


@dataclass
class Counts:
    """Records looked at in one round, by what became of them."""

    seen: int = 0
    used: int = 0
    stale: int = 0  # too many versions behind, of no known version, or ahead of the trainer
    swapped: int = 0  # spanned a weight swap
    inconsistent: int = 0  # served while an update had failed midway
    unscored: int = 0  # eligible, but nothing scored it (yet)
    below_threshold: int = 0  # eligible and scored, under sft's threshold (a report may lift it)
    failed: int = 0  # not complete, or not status 200

    def add(self, other: Counts) -> Counts:
        return Counts(**{k: v + getattr(other, k) for k, v in asdict(self).items()})

    def to_json(self) -> dict[str, int]:
        return asdict(self)


def settled(record: Record) -> bool:
    """False while a stream is still being written: such a record is neither used nor
    dropped this round (it is looked at again when it ends)."""
    return record.state != "streaming"


def eligible(
    records: Iterable[Record], current_version: str, max_staleness: int | None
) -> tuple[list[Record], Counts]:
    """The records that may train ``current_version`` and the counts of the rest.

    ``used`` starts as the number kept; a recipe lowers it to the records it made samples
    of. Records still streaming are skipped and not counted."""
    current = number(current_version)
    counts = Counts()
    kept: list[Record] = []
    for record in records:
        if not settled(record):
            continue
        counts.seen += 1
        if record.state != "complete" or record.status != 200:
            counts.failed += 1
            continue
        if max_staleness is None:  # off-policy: who wrote it does not matter
            kept.append(record)
            continue
        if record.weight_note is not None:
            if record.weight_note == INCONSISTENT:
                counts.inconsistent += 1
            else:
                counts.swapped += 1
            continue
        version = _number_or_none(record.weight_version)
        if version is None or not 0 <= current - version <= max_staleness:
            counts.stale += 1
            continue
        kept.append(record)
    counts.used = len(kept)
    return kept, counts

"""Retention: keep records within the configured budget, never losing evidence.

Records grow without bound; ``records_max_age_days`` and ``records_max_gb`` (config.toml /
``REEF_*``) bound them. :func:`enforce` deletes the oldest records past either limit.
What it never takes: a record a report references or a ``streaming`` row (the store
guards those itself) and a record any release cites as evidence (:func:`cited_receipts`:
a release must stay explainable by the traffic it learnt from, so its receipts stay).

Cited receipts are read from every chain on this machine — each scenario's harness chain
and its reefd weights chain, archived scenarios too (``reef scenario restore`` brings them
back) — by a regex over each release's metadata, so a recipe that files receipts under a
new key is covered without a change here. A chain that cannot be read stops eviction
(``ChainCorrupt``): deleting while blind to what is cited could lose evidence.
"""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reef_cli.core.config import Settings
from reef_cli.core.store.base import Evicted, Store

RECEIPT = re.compile(r"(?<![0-9A-Za-z_])rec_[0-9a-f]{24}(?![0-9A-Za-z_])")
LOCK_KEY = "reef:retention"  # one replica evicts at a time
GB = 10**9  # records_max_gb is decimal gigabytes, as `reef records stats` shows them

# (git dir, ref) -> (head commit, receipts): a chain only changes when its head moves, and
# the server calls enforce periodically, so each chain's metadata is read once per head
_cache: dict[tuple[Path, str], tuple[str, frozenset[str]]] = {}
_cache_lock = threading.Lock()


def _chain_dirs() -> list[Path]:
    from reef_cli.core import scenarios

    dirs = [s.chain_dir for s in scenarios.list_all()]
    dirs += [p / scenarios.CHAIN_DIR for p in scenarios.list_archived()]
    return [d for d in dirs if d.is_dir()]


def _cited_in(git_dir: Path, ref: str, tag_prefix: str) -> frozenset[str]:
    from reef_cli.core.releases import Chain

    chain = Chain(git_dir, ref=ref, tag_prefix=tag_prefix)
    head = chain.head()
    if head is None:
        return frozenset()
    key = (git_dir.resolve(), ref)
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and hit[0] == head:
        return hit[1]
    found: set[str] = set()
    for release in chain.releases():
        found.update(RECEIPT.findall(release.meta.model_dump_json()))
    receipts = frozenset(found)
    with _cache_lock:
        _cache[key] = (head, receipts)
    return receipts


def cited_receipts() -> set[str]:
    """Every receipt (``rec_<24 hex>``) a release of any scenario cites in its metadata
    (``RELEASE.json`` of the harness chain and of ``refs/reef/weights``)."""
    from reef_cli.core.releases import CHAIN_REF, WEIGHTS_REF

    out: set[str] = set()
    for git_dir in _chain_dirs():
        out |= _cited_in(git_dir, CHAIN_REF, "r")
        out |= _cited_in(git_dir, WEIGHTS_REF, "w")
    return out


def cutoff(max_age_days: float, now: datetime | None = None) -> str:
    """The ISO time (the records' own format) before which a record is too old."""
    moment = (now or datetime.now(UTC)) - timedelta(days=max_age_days)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def budget_set(settings: Settings) -> bool:
    return settings.records_max_age_days is not None or settings.records_max_gb is not None


def enforce(
    store: Store,
    settings: Settings,
    *,
    max_gb: float | None = None,
    max_age_days: float | None = None,
) -> Evicted:
    """Evict what the budget (``settings``, or the overrides given) allows, oldest first,
    keeping referenced, streaming and cited records. Nothing to do without a budget.

    Holds the store's ``reef:retention`` lock, so of several replicas on one database one
    evicts and the others return ``Evicted(0, 0)`` at once."""
    days = max_age_days if max_age_days is not None else settings.records_max_age_days
    gb = max_gb if max_gb is not None else settings.records_max_gb
    if days is None and gb is None:
        return Evicted(0, 0)
    with store.exclusive(LOCK_KEY) as held:
        if not held:
            return Evicted(0, 0)
        protected = cited_receipts()  # read before deleting: a blind evict could lose evidence
        return store.evict(
            before=cutoff(days) if days is not None else None,
            max_bytes=int(gb * GB) if gb is not None else None,
            protected=protected,
        )

"""Which records may train the current weights: staleness, swaps and failures, counted."""

from __future__ import annotations

import pytest

from reef_cli.core.errors import ConfigError
from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.core.weight_version import INCONSISTENT, SPANNED_SWAP
from reefd.weight_recipes.eligibility import Counts, eligible, number
from tests.reefd.weight_recipes.records import SCENARIO, at, put


def test_number() -> None:
    assert number("base") == 0
    assert number("w1") == 1
    assert number("w12") == 12
    for bad in ("w", "v3", "w-1", "W3", ""):
        with pytest.raises(ConfigError):
            number(bad)


def test_staleness_swaps_and_failures_are_dropped_and_counted() -> None:
    store = SQLiteStore()
    fresh = put(store, version="w4", at=at(1))
    two_behind = put(store, version="w2", at=at(2))
    put(store, version="w1", at=at(3))  # 3 behind w4: stale at max_staleness 2
    put(store, version="base", at=at(4))  # 4 behind
    put(store, version=None, at=at(5))  # served without reefd: no version to bound
    put(store, version="w5", at=at(6))  # ahead of the trainer: not its lineage
    put(store, version="w4", note=SPANNED_SWAP, at=at(7))
    put(store, version="w4", note=INCONSISTENT, at=at(8))
    put(store, version="w4", status=500, at=at(9))
    put(store, version="w4", state="interrupted", at=at(10))
    put(store, version="w4", state="streaming", at=at(11))  # still running: not looked at

    records = list(store.iter(scenario=SCENARIO))
    kept, counts = eligible(records, "w4", max_staleness=2)

    assert [r.id for r in kept] == [fresh.id, two_behind.id]
    assert counts == Counts(
        seen=10, used=2, stale=4, swapped=1, inconsistent=1, unscored=0, failed=2
    )
    assert counts.to_json()["stale"] == 4


def test_max_staleness_zero_keeps_only_the_current_version() -> None:
    store = SQLiteStore()
    current = put(store, version="w3", at=at(1))
    put(store, version="w2", at=at(2))
    kept, counts = eligible(store.iter(scenario=SCENARIO), "w3", max_staleness=0)
    assert [r.id for r in kept] == [current.id]
    assert counts.stale == 1


def test_counts_add() -> None:
    total = Counts(seen=2, used=1, stale=1).add(Counts(seen=3, failed=2, unscored=1))
    assert total == Counts(seen=5, used=1, stale=1, unscored=1, failed=2)

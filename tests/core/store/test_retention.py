"""Retention on both backends: the age and size budgets evict oldest first, and never a
record a report references or a release (harness or weights chain) cites as evidence."""

from __future__ import annotations

from reef_cli.core import retention, scenarios
from reef_cli.core.config import Settings
from reef_cli.core.records import Record
from reef_cli.core.releases import WEIGHTS_REF, Chain
from reef_cli.core.store import ReportRow, Store
from reef_cli.core.tree import starter_tree

TREE = starter_tree().files()


def rec(n: int, *, year: int = 2020, pad: int = 100) -> Record:
    return Record(
        id=f"rec_{n:024x}",
        scenario="demo",
        client_dialect="openai",
        upstream_dialect="openai",
        request={"pad": "x" * pad},
        created_at=f"{year}-01-01T00:00:{n:02d}.000000Z",
    )


def report(refs: list[str]) -> ReportRow:
    return ReportRow(
        id="rep_" + refs[0][4:],
        scenario="demo",
        score=1.0,
        feedback=None,
        references=refs,
        metadata=None,
        content_hash="h",
        created_at="2020-02-01T00:00:00.000000Z",
    )


def ids(store: Store) -> list[str]:
    return [r.id for r in store.iter()]


def test_age_budget_keeps_referenced_and_cited_records(store: Store) -> None:
    old = [rec(i) for i in range(6)]
    recent = rec(7, year=2999)
    store.insert_many([*old, recent])
    store.put_report(report([old[0].id]))
    demo = scenarios.create("demo")
    # a recipe's evidence, nested as skillclaw files it: {session: [receipts]}
    demo.chain().publish(
        TREE, extra={"evidence": {"skillclaw": {"receipts": {"session:a": [old[1].id]}}}}
    )
    weights = Chain(demo.chain_dir, ref=WEIGHTS_REF, tag_prefix="w")
    weights.publish({"weights.txt": "w\n"}, extra={"kind": "lora", "trained_on": [old[2].id]})
    assert retention.cited_receipts() == {old[1].id, old[2].id}

    gone = retention.enforce(store, Settings(records_max_age_days=30))

    assert gone.records == 3  # old[3..5]
    assert ids(store) == [old[0].id, old[1].id, old[2].id, recent.id]


def test_size_budget_evicts_oldest_first_until_it_fits(store: Store) -> None:
    rows = [rec(i, year=2999) for i in range(10)]  # too new for any age budget
    store.insert_many(rows)
    scenarios.create("demo").chain().publish(TREE, reason=f"learnt from {rows[0].id}")
    per_row = store.sizes()[0].bytes // 10
    budget_gb = per_row * 4 / retention.GB

    gone = retention.enforce(store, Settings(records_max_gb=budget_gb, records_max_age_days=1))

    assert (gone.records, gone.bytes) == (6, per_row * 6)  # 1 cited + the newest 3 fit
    assert ids(store) == [rows[0].id, *[r.id for r in rows[7:]]]
    assert store.sizes()[0].bytes <= per_row * 4


def test_no_budget_evicts_nothing(store: Store) -> None:
    store.insert_many([rec(i) for i in range(3)])
    assert retention.enforce(store, Settings()).records == 0
    assert store.count() == 3


def test_overrides_replace_the_settings(store: Store) -> None:
    store.insert_many([rec(i) for i in range(3)])
    assert retention.enforce(store, Settings(), max_age_days=1).records == 3


def test_a_release_published_later_is_seen_and_archived_chains_count(store: Store) -> None:
    a, b = rec(1), rec(2)
    store.insert_many([a, b])
    chain = scenarios.create("demo").chain()
    chain.publish(TREE, extra={"receipts": [a.id]})
    assert retention.cited_receipts() == {a.id}  # read once, cached by head
    chain.publish({**TREE, "rules/x.md": "x\n"}, extra={"receipts": [b.id]})
    assert retention.cited_receipts() == {a.id, b.id}  # the head moved: read again
    scenarios.delete("demo")  # archived, not gone: `reef scenario restore` brings it back
    assert retention.enforce(store, Settings(records_max_age_days=1)).records == 0
    assert store.count() == 2


def test_one_replica_evicts_at_a_time(store: Store) -> None:
    store.insert_many([rec(i) for i in range(3)])
    with store.exclusive(retention.LOCK_KEY) as held:
        assert held
        assert retention.enforce(store, Settings(records_max_age_days=1)).records == 0
    assert retention.enforce(store, Settings(records_max_age_days=1)).records == 3

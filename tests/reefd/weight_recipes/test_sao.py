"""SAO: scored records, one unit each, advantage = score - running baseline."""

from __future__ import annotations

from typing import Any

import pytest

from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.core.weight_version import SPANNED_SWAP
from reefd.weight_recipes import recipe_named
from reefd.weight_recipes.sao import SAO, sao_advantages
from tests.reefd.weight_recipes.records import SCENARIO, at, put, score


@pytest.fixture
def tokenizer() -> Any:
    pytest.importorskip("transformers")
    from reefd import models

    return models.byte_tokenizer()


def test_sao_advantages_by_hand() -> None:
    advantages, after = sao_advantages([1.0, 0.0, 0.5], 0.4, 0.9)
    assert advantages == pytest.approx([1.0 - 0.4, 0.0 - 0.4, 0.5 - 0.4])
    # b = 0.9 b + 0.1 s, score by score: 0.36 + 0.1 = 0.46; 0.414 + 0 = 0.414; 0.3726 + 0.05
    assert after == pytest.approx(0.4226)


def test_the_first_batch_starts_the_baseline_at_its_mean() -> None:
    advantages, after = sao_advantages([1.0, 0.0], None, 0.5)
    assert advantages == pytest.approx([0.5, -0.5])  # mean 0.5
    assert after == pytest.approx(0.5 * (0.5 * 0.5 + 0.5 * 1.0) + 0.5 * 0.0)  # 0.1875
    assert sao_advantages([], None, 0.9) == ([], 0.0)
    assert sao_advantages([], 0.3, 0.9) == ([], 0.3)


def test_batch_takes_scored_eligible_records_oldest_first(tokenizer: Any) -> None:
    store = SQLiteStore()
    engine_ids = {"prompt": [1, 2, 3], "response": [72, 105, 257]}
    first = put(
        store,
        reply="yes",
        version="w3",
        at=at(1),
        stream=False,
        token_ids=engine_ids,
        logprobs=[-0.1, -0.2, -0.3],
    )
    second = put(store, reply="no", version="w2", at=at(2))  # streamed: re-tokenized
    third = put(store, reply="maybe", version="w3", at=at(3))  # scored, beyond batch_size
    stale = put(store, reply="old", version="base", at=at(4))
    swapped = put(store, reply="mid-swap", version="w3", note=SPANNED_SWAP, at=at(5))
    unscored = put(store, reply="nobody", version="w3", at=at(6))
    feedback_only = put(store, reply="words", version="w3", at=at(7))
    put(store, reply="elsewhere", version="w3", at=at(8), scenario="other")
    score(store, 1.0, first, stale)
    score(store, 0.2, second)
    score(store, 0.0, second)  # the latest report about a record counts
    score(store, 0.5, third, swapped)
    score(store, None, feedback_only, feedback="nice")

    recipe = SAO(batch_size=2, max_staleness=2, baseline_decay=0.9, tokenizer=tokenizer)
    batch = recipe.batch(store, SCENARIO, "w3", set())

    assert [s.record_id for s in batch.samples] == [first.id, second.id]
    # no baseline yet: it starts at the batch's mean, (1.0 + 0.0) / 2
    assert [s.advantage for s in batch.samples] == pytest.approx([0.5, -0.5])
    one, two = batch.samples
    assert (one.prompt_ids, one.response_ids, one.old_logprobs) == (
        [1, 2, 3],
        [72, 105, 257],
        [-0.1, -0.2, -0.3],
    )
    assert two.response_ids == [ord("n"), ord("o"), 257] and two.old_logprobs is None
    assert batch.counts.to_json() == {
        "seen": 7,
        "used": 2,
        "stale": 1,
        "swapped": 1,
        "inconsistent": 0,
        "unscored": 2,
        "below_threshold": 0,  # sft's: sao trains on every score
        "failed": 0,
    }
    assert sorted(batch.dropped) == sorted([stale.id, swapped.id])
    assert sorted(batch.consumed) == sorted([first.id, second.id, stale.id, swapped.id])
    assert third.id not in batch.consumed and unscored.id not in batch.consumed

    # the gate could not judge it: nothing consumed, the same batch again, baseline unmoved
    again = recipe.batch(store, SCENARIO, "w3", set())
    assert [s.advantage for s in again.samples] == pytest.approx([0.5, -0.5])
    assert recipe.state["baseline"] is None

    # consumed: the baseline moves (0.5 -> 0.9*0.5 + 0.1*1.0 = 0.55 -> 0.9*0.55 + 0 = 0.495)
    spent = set(again.consumed)
    last = recipe.batch(store, SCENARIO, "w3", spent)
    assert recipe.state["baseline"] == pytest.approx(0.495)
    assert [s.record_id for s in last.samples] == [third.id]
    assert last.samples[0].advantage == pytest.approx(0.5 - 0.495)
    assert last.counts.stale == 0 and last.counts.unscored == 2


def test_state_survives_a_restart(tokenizer: Any) -> None:
    store = SQLiteStore()
    a, b = put(store, reply="a", at=at(1)), put(store, reply="b", at=at(2))
    score(store, 1.0, a)
    score(store, 0.0, b)
    recipe = SAO(batch_size=1, max_staleness=2, tokenizer=tokenizer)
    batch = recipe.batch(store, SCENARIO, "base", set())
    saved = dict(recipe.state)  # what the daemon writes with the consumed ids

    restarted = recipe_named("sao", batch_size=1, max_staleness=2, tokenizer=tokenizer)
    restarted.state.update(saved)
    later = restarted.batch(store, SCENARIO, "base", set(batch.consumed))
    assert restarted.state["baseline"] == pytest.approx(1.0)  # a's score, taken on
    assert [s.record_id for s in later.samples] == [b.id]
    assert later.samples[0].advantage == pytest.approx(0.0 - 1.0)

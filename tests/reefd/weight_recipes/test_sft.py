"""SFT: records whose latest report reaches the threshold, as supervised samples."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reef_cli.core.errors import ConfigError
from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.core.weight_version import SPANNED_SWAP
from reefd.daemon_config import parse
from reefd.weight_recipes import recipe_named
from reefd.weight_recipes.sft import SFT
from tests.reefd.weight_recipes.records import SCENARIO, at, put, score


@pytest.fixture
def tokenizer() -> Any:
    pytest.importorskip("transformers")
    from reefd import models

    return models.byte_tokenizer()


def test_batch_takes_accepted_eligible_records_oldest_first(tokenizer: Any) -> None:
    store = SQLiteStore()
    engine_ids = {"prompt": [1, 2, 3], "response": [111, 107, 257]}
    first = put(
        store,
        reply="ok",
        version="w3",
        at=at(1),
        stream=False,
        token_ids=engine_ids,
        logprobs=[-0.1, -0.2, -0.3],
    )
    second = put(store, reply="fine", version="w2", at=at(2))  # streamed: re-tokenized
    third = put(store, reply="sure", version="w3", at=at(3))  # accepted, beyond batch_size
    half = put(store, reply="meh", version="w3", at=at(4))  # 0.5 < 1.0
    retracted = put(store, reply="oops", version="w3", at=at(5))  # accepted, then not
    stale = put(store, reply="old", version="base", at=at(6))  # 3 behind w3
    swapped = put(store, reply="mid-swap", version="w3", note=SPANNED_SWAP, at=at(7))
    unscored = put(store, reply="nobody", version="w3", at=at(8))
    feedback_only = put(store, reply="words", version="w3", at=at(9))
    put(store, reply="elsewhere", version="w3", at=at(10), scenario="other")
    score(store, 0.0, second)
    score(store, 1.0, second)  # the latest report about a record counts
    score(store, 1.0, first, stale, swapped)
    score(store, 1.0, third, retracted)
    score(store, 0.0, retracted)
    score(store, 0.5, half)
    score(store, None, feedback_only, feedback="nice")

    recipe = SFT(batch_size=2, max_staleness=2, tokenizer=tokenizer)
    batch = recipe.batch(store, SCENARIO, "w3", set())

    assert batch.loss == "nll"
    assert [s.record_id for s in batch.samples] == [first.id, second.id]
    one, two = batch.samples
    # the engine's own ids are the targets; its logprobs are not needed (no π_old)
    assert (one.prompt_ids, one.response_ids, one.old_logprobs) == (
        [1, 2, 3],
        [111, 107, 257],
        None,
    )
    assert two.response_ids == [ord("f"), ord("i"), ord("n"), ord("e"), 257]
    assert two.prompt_ids[-3:] == list(b"nt\n")  # the chat template's open assistant turn
    assert [s.advantage for s in batch.samples] == [1.0, 1.0]
    assert batch.counts.to_json() == {
        "seen": 9,
        "used": 2,
        "stale": 1,
        "swapped": 1,
        "inconsistent": 0,
        "unscored": 2,  # unscored, feedback only
        "below_threshold": 2,  # half, retracted
        "failed": 0,
    }
    assert sorted(batch.dropped) == sorted([stale.id, swapped.id])
    assert sorted(batch.consumed) == sorted([first.id, second.id, stale.id, swapped.id])
    for waiting in (third, half, retracted, unscored):  # a later batch or report decides
        assert waiting.id not in batch.consumed

    # consumed records are never offered again: the next batch starts at the third
    later = recipe.batch(store, SCENARIO, "w3", set(batch.consumed))
    assert [s.record_id for s in later.samples] == [third.id]
    assert later.counts.stale == 0 and later.counts.below_threshold == 2
    # a new report that accepts a record below the threshold makes it a sample
    score(store, 1.0, half)
    assert [
        s.record_id for s in recipe.batch(store, SCENARIO, "w3", set(batch.consumed)).samples
    ] == [
        third.id,
        half.id,
    ]


def test_the_threshold_decides_what_is_accepted(tokenizer: Any) -> None:
    store = SQLiteStore()
    records = [put(store, reply=f"answer {i}", at=at(i)) for i in range(4)]
    for record, value in zip(records, [1.0, 0.8, 0.79, 0.0], strict=True):
        score(store, value, record)

    def accepted(threshold: float) -> list[str]:
        recipe = recipe_named(
            "sft", batch_size=8, max_staleness=2, threshold=threshold, tokenizer=tokenizer
        )
        return [s.record_id for s in recipe.batch(store, SCENARIO, "base", set()).samples]

    assert accepted(1.0) == [records[0].id]  # the default: fully accepted only
    assert accepted(0.8) == [records[0].id, records[1].id]  # at or above
    assert accepted(0.01) == [r.id for r in records[:3]]
    assert recipe_named("sft", tokenizer=tokenizer).threshold == 1.0


def test_a_record_with_nothing_to_imitate_is_dropped(tokenizer: Any) -> None:
    store = SQLiteStore()
    empty = put(store, reply="", at=at(1))
    score(store, 1.0, empty)
    batch = SFT(tokenizer=tokenizer).batch(store, SCENARIO, "base", set())
    assert batch.samples == [] and batch.dropped == [empty.id] and batch.counts.failed == 1


@pytest.mark.parametrize("threshold", [0, -0.5, 1.01, float("nan"), float("inf")])
def test_a_threshold_out_of_range_is_one_line_naming_the_setting(threshold: float) -> None:
    with pytest.raises(ConfigError) as caught:
        recipe_named("sft", threshold=threshold)
    line = caught.value.one_line()
    assert "out of range" in line and "recipe.threshold" in line and "\n" not in line


def test_an_unknown_option_names_the_options() -> None:
    with pytest.raises(ConfigError) as caught:
        recipe_named("sft", baseline_decay=0.9)
    assert "has no option 'baseline_decay'" in caught.value.one_line()
    assert "threshold" in caught.value.one_line()  # the fix lists the recipe's options


def test_reefd_yaml_takes_sft_and_checks_its_threshold(tmp_path: Path) -> None:
    gate = {"tasks": str(tmp_path / "tasks.yaml")}
    config = parse({"gate": gate, "recipe": {"name": "sft", "threshold": 0.75}})
    assert (config.recipe.name, config.recipe.threshold) == ("sft", 0.75)
    assert parse({"gate": gate, "recipe": {"name": "sft"}}).recipe.threshold == 1.0
    for bad, message in (
        ({"name": "sft", "threshold": 0}, "'recipe.threshold'"),
        ({"name": "sft", "threshold": 2}, "'recipe.threshold'"),
        ({"name": "sft", "thresold": 1}, "'recipe.thresold'"),
        ({"name": "sftt"}, "'recipe.name'"),
    ):
        with pytest.raises(ConfigError) as caught:
            parse({"gate": gate, "recipe": bad})
        assert message in caught.value.one_line(), bad


def test_by_default_an_accepted_answer_trains_whoever_wrote_it(tokenizer: Any) -> None:
    """Off-policy: a record from a plain `reef serve` (no weight version), one from old
    weights and one that spanned a swap are all demonstrations; a failed one is not."""
    store = SQLiteStore()
    served = put(store, reply="from a hosted model", version=None, at=at(1))
    old = put(store, reply="from the base weights", version="base", at=at(2))
    swapped = put(store, reply="mid-swap", version="w3", note=SPANNED_SWAP, at=at(3))
    score(store, 1.0, served, old, swapped)
    batch = SFT(batch_size=8, tokenizer=tokenizer).batch(store, SCENARIO, "w3", set())
    assert [s.record_id for s in batch.samples] == [served.id, old.id, swapped.id]
    assert batch.counts.stale == batch.counts.swapped == 0
    # with a staleness bound, the on-policy rule applies
    bounded = SFT(batch_size=8, max_staleness=2, tokenizer=tokenizer)
    batch = bounded.batch(store, SCENARIO, "w3", set())
    assert batch.samples == [] and batch.counts.stale == 2 and batch.counts.swapped == 1
    # reefd.yaml leaves it unset unless asked
    assert recipe_named("sft", max_staleness=None, tokenizer=tokenizer).max_staleness is None

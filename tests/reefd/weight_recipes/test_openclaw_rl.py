"""OpenClaw-RL: turn t judged by turn t+1 (a majority of votes), the last turn masked, a
judge outage skipping the session. The judge is a scripted model on a real port."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from reef_cli.core.budget import Budget
from reef_cli.core.llm import ModelClient
from reef_cli.core.records import Record
from reef_cli.core.store.sqlite import SQLiteStore
from reefd.weight_recipes import recipe_named
from reefd.weight_recipes.openclaw_rl import OpenClawRL, majority, next_state, turn_pairs
from tests.fakes.scripted import Scripted
from tests.reefd.weight_recipes.records import SCENARIO, at, put


def vote(score: int) -> str:
    return json.dumps({"score": score, "reason": "Judged by what came next."})


@pytest.fixture
def tokenizer() -> Any:
    pytest.importorskip("transformers")
    from reefd import models

    return models.byte_tokenizer()


def _judge(scripted: Scripted) -> ModelClient:
    return ModelClient("openai/scripted", api_base=scripted.api_base, budget=Budget(), retries=0)


def _dead_judge() -> ModelClient:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return ModelClient("openai/down", api_base=f"http://127.0.0.1:{port}/v1", retries=0)


def _session(
    store: SQLiteStore, session: str, start: int, turns: int, version: str = "base"
) -> list[Record]:
    """A conversation of ``turns`` records; each request repeats the history before it."""
    history: list[dict[str, Any]] = [{"role": "user", "content": f"{session}: question 0"}]
    out = []
    for t in range(turns):
        reply = f"{session}: answer {t}"
        out.append(
            put(
                store,
                messages=list(history),
                reply=reply,
                session=session,
                at=at(start + t),
                version=version,
            )
        )
        history += [
            {"role": "assistant", "content": reply},
            {"role": "user", "content": f"{session}: reaction to answer {t}"},
        ]
    return out


def test_majority() -> None:
    assert majority([1, 1, -1]) == 1
    assert majority([-1, -1, 0]) == -1
    assert majority([0, 0, 1]) == 0
    assert majority([1, -1, 0]) == 0  # three-way tie
    assert majority([1, -1]) == 0
    assert majority([1, 1, -1, -1, 0]) == 0  # tie for the most
    assert majority([1]) == 1
    assert majority([]) == 0


def test_turn_pairs_follow_created_at() -> None:
    store = SQLiteStore()
    late = put(store, session="s", at=at(9))
    early = put(store, session="s", at=at(1))
    middle = put(store, session="s", at=at(5))
    pairs = turn_pairs([late, early, middle])
    assert [(a.id, b.id if b else None) for a, b in pairs] == [
        (early.id, middle.id),
        (middle.id, late.id),
        (late.id, None),
    ]
    assert turn_pairs([]) == []


def test_next_state_is_what_the_next_request_adds() -> None:
    store = SQLiteStore()
    first, second = _session(store, "s", 1, 2)
    assert next_state(first, second) == "user: s: reaction to answer 0"
    rewritten = put(store, messages=[{"role": "user", "content": "start over"}], session="s")
    assert next_state(first, rewritten) == "user: start over"


def test_turns_judged_by_the_next_one_last_masked(scripted: Scripted, tokenizer: Any) -> None:
    store = SQLiteStore()
    s1 = _session(store, "s1", 1, 3)
    (only,) = _session(store, "s2", 10, 1)
    scripted.push(vote(1), vote(1), vote(-1))  # s1 turn 0: majority +1
    scripted.push(vote(-1), vote(0), vote(1))  # s1 turn 1: a tie, 0
    scripted.push(vote(-1), vote(-1), vote(1))  # s2's only turn: -1
    recipe = OpenClawRL(
        _judge(scripted), votes=3, batch_size=3, max_staleness=2, tokenizer=tokenizer
    )

    batch = recipe.batch(store, SCENARIO, "base", set())

    assert [(s.record_id, s.advantage) for s in batch.samples] == [
        (s1[0].id, 1.0),
        (s1[1].id, 0.0),
        (only.id, -1.0),
    ]
    assert s1[2].id not in batch.consumed  # the last turn waits for its next state
    assert sorted(batch.consumed) == sorted([s1[0].id, s1[1].id, only.id])
    assert batch.counts.used == 3 and batch.counts.unscored == 1
    sample = batch.samples[0]
    assert sample.response_ids[:-1] == list(b"s1: answer 0")  # every response token
    calls = scripted.inference()
    assert len(calls) == 9
    first_prompt = calls[0].body["messages"][-1]["content"]
    assert "s1: answer 0" in first_prompt and "s1: reaction to answer 0" in first_prompt
    assert "the conversation ended here" in calls[-1].body["messages"][-1]["content"]

    # waiting for more: the verdicts are kept, the judge is not asked again
    again = recipe.batch(store, SCENARIO, "base", set())
    assert [(s.record_id, s.advantage) for s in again.samples] == [
        (s.record_id, s.advantage) for s in batch.samples
    ]
    assert len(scripted.inference()) == 9

    # a next turn arrives: the old last turn is judged given it; spent verdicts are pruned
    put(store, messages=[{"role": "user", "content": "s1: thanks"}], session="s1", at=at(4))
    scripted.push(vote(1), vote(0), vote(1))
    later = recipe.batch(store, SCENARIO, "base", set(batch.consumed))
    assert [(s.record_id, s.advantage) for s in later.samples] == [(s1[2].id, 1.0)]
    assert "s1: thanks" in scripted.inference()[-1].body["messages"][-1]["content"]
    assert set(recipe.state["rewards"]) == {s1[2].id}


def test_a_judge_outage_skips_the_session(tokenizer: Any) -> None:
    store = SQLiteStore()
    turns = _session(store, "s", 1, 2, version="w3")
    stale = put(store, version="w0", session="t", at=at(20))
    recipe = OpenClawRL(_dead_judge(), votes=3, batch_size=1, max_staleness=2, tokenizer=tokenizer)
    batch = recipe.batch(store, SCENARIO, "w3", set())
    assert batch.samples == []
    assert batch.consumed == batch.dropped == [stale.id]  # only what can never train
    assert turns[0].id not in batch.consumed
    assert batch.counts.unscored == 2  # the judged turn (out) and the masked last one


def test_stale_turns_still_give_the_turn_before_its_next_state(
    scripted: Scripted, tokenizer: Any
) -> None:
    store = SQLiteStore()
    first, second = _session(store, "s", 1, 2)
    store.insert(Record(**{**second.__dict__, "weight_version": "base"}))
    first_w = Record(**{**first.__dict__, "weight_version": "w3"})
    store.insert(first_w)
    scripted.push(vote(1))
    recipe = recipe_named(
        "openclaw_rl",
        judge=_judge(scripted),
        votes=1,
        batch_size=1,
        max_staleness=1,
        tokenizer=tokenizer,
    )
    batch = recipe.batch(store, SCENARIO, "w3", set())
    assert [(s.record_id, s.advantage) for s in batch.samples] == [(first.id, 1.0)]
    assert batch.dropped == [second.id] and batch.counts.stale == 1
    assert "s: reaction to answer 0" in scripted.inference()[0].body["messages"][-1]["content"]

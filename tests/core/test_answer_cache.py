"""The answer cache: content-addressed greedy answers of the embedded model.

The model is replaced by a counting function (``embedded_engine.chat``): these tests are
about which calls reach the model, not about what it says. The real model's side of the
promise (the same input gives the same answer, so a cached answer is the answer) is
tested end to end in tests/e2e/test_answer_cache_embedded.py."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from reef_cli.core import answer_cache, embedded_engine
from reef_cli.core.budget import Budget
from reef_cli.core.llm import EMBEDDED, ModelClient

IDENTITY = {
    "model": "qwen2.5-coder-1.5b",
    "sha256": "ab" * 32,
    "repeat_penalty": 1.1,
    "context_tokens": 4096,
    "llama_cpp_python": "0.3.36",
}
ASK = [{"role": "user", "content": "What is 2 + 2?"}]


class CountingModel:
    """Stands in for the embedded model: answers with a count of the calls so far."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        return {
            "model": "embedded",
            "choices": [{"message": {"content": f"answer {self.calls}"}}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 2},
        }


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> CountingModel:
    counting = CountingModel()
    monkeypatch.setattr(embedded_engine, "chat", counting)
    monkeypatch.setattr(embedded_engine, "identity", lambda: dict(IDENTITY))
    return counting


def test_a_greedy_embedded_answer_is_asked_once(model: CountingModel) -> None:
    budget = Budget()
    client = ModelClient(EMBEDDED, budget=budget)
    first = client.chat(ASK, max_tokens=64, temperature=0.0)
    again = ModelClient(EMBEDDED, budget=budget).chat(ASK, max_tokens=64, temperature=0.0)
    assert model.calls == 1
    assert again.text == first.text == "answer 1"
    assert (again.prompt_tokens, again.completion_tokens) == (7, 2)
    assert budget.calls == 1  # a reused answer is not a model call
    assert answer_cache.size() == 1


def test_every_part_of_the_request_is_in_the_key(model: CountingModel) -> None:
    client = ModelClient(EMBEDDED)
    client.chat(ASK, max_tokens=64, temperature=0.0)
    client.chat(ASK, max_tokens=65, temperature=0.0)
    client.chat([{"role": "system", "content": "Be brief."}, *ASK], max_tokens=64, temperature=0.0)
    client.chat(ASK, max_tokens=64, temperature=0.0, schema={"type": "object"})
    assert model.calls == 4
    assert client.reused == 0


@pytest.mark.parametrize("field", sorted(IDENTITY))
def test_a_change_to_the_engine_is_a_new_key(field: str) -> None:
    changed = {**IDENTITY, field: f"{IDENTITY[field]}-other"}
    request = {"messages": ASK, "max_tokens": 64, "schema": None}
    assert answer_cache.key(changed, request) != answer_cache.key(IDENTITY, request)


def test_sampled_and_hosted_answers_are_never_reused(
    model: CountingModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = ModelClient(EMBEDDED)
    client.chat(ASK, max_tokens=64, temperature=0.2)
    client.chat(ASK, max_tokens=64, temperature=0.2)
    assert model.calls == 2
    hosted = ModelClient("openai/some-model", api_base="http://127.0.0.1:9")
    assert hosted._cache_address(ASK, 64, 0.0, None) is None
    assert answer_cache.size() == 0


def test_no_cache_asks_again_and_stores_the_new_answer(model: CountingModel) -> None:
    ModelClient(EMBEDDED).chat(ASK, max_tokens=64, temperature=0.0)
    fresh = ModelClient(EMBEDDED, cache=False).chat(ASK, max_tokens=64, temperature=0.0)
    assert (model.calls, fresh.text) == (2, "answer 2")
    later = ModelClient(EMBEDDED).chat(ASK, max_tokens=64, temperature=0.0)
    assert (model.calls, later.text) == (2, "answer 2")


def test_no_model_installed_means_no_cache(
    model: CountingModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedded_engine, "identity", lambda: None)
    client = ModelClient(EMBEDDED)
    client.chat(ASK, max_tokens=64, temperature=0.0)
    client.chat(ASK, max_tokens=64, temperature=0.0)
    assert model.calls == 2


def test_the_least_recently_used_answers_go_beyond_the_bound(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(answer_cache, "MAX_ENTRIES", 3)
    path = tmp_path / "answers.sqlite3"
    for name in "abcd":
        answer_cache.put(name, answer_cache.Cached(name, 1, 1, "m"), path)
        if name == "b":
            assert answer_cache.get("a", path) is not None  # "a" used after "b" was stored
    assert answer_cache.size(path) == 3
    assert answer_cache.get("b", path) is None  # the least recently used
    assert [answer_cache.get(k, path) is not None for k in "acd"] == [True, True, True]


def test_the_cache_file_is_private(model: CountingModel) -> None:
    ModelClient(EMBEDDED).chat(ASK, max_tokens=64, temperature=0.0)
    path = answer_cache.cache_file()
    assert path.stat().st_mode & 0o077 == 0
    assert path.parent.stat().st_mode & 0o077 == 0


def test_a_corrupt_cache_is_a_warning_not_an_error(
    model: CountingModel, caplog: pytest.LogCaptureFixture
) -> None:
    path = answer_cache.cache_file()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database " * 100)
    answer_cache._warned.clear()
    client = ModelClient(EMBEDDED)
    with caplog.at_level(logging.WARNING, logger="reef.answer_cache"):
        first = client.chat(ASK, max_tokens=64, temperature=0.0)
        client.chat(ASK, max_tokens=64, temperature=0.0)
    assert (first.text, model.calls) == ("answer 1", 2)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1, warnings  # once per file, not per call
    assert "cannot be used" in warnings[0] and "delete the file" in warnings[0]
    with pytest.raises(sqlite3.DatabaseError):  # the file is left as it was, for a person
        sqlite3.connect(path).execute("SELECT * FROM answers").fetchall()


def test_batched_answers_are_never_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batched answer depends on what was decoded beside it, not on its request alone."""
    monkeypatch.setenv("REEF_EMBEDDED_SLOTS", "2")
    assert embedded_engine.identity() is None

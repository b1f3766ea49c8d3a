"""The wall-time budget holds inside a step, not only between steps: a retry's backoff
never sleeps past it, and the embedded model stops inside a long prompt's processing
(where no token comes to check between) once the call's deadline passes.

The bound: a job stops within ``max_seconds`` plus one graph node of llama.cpp's work
(the abort callback's granularity) or one HTTP timeout slice cut to the time left."""

from __future__ import annotations

import time

import pytest

from reef_cli.core import llm
from reef_cli.core.budget import Budget
from reef_cli.core.errors import BudgetExceeded, ModelError, ReefError
from reef_cli.core.llm import EMBEDDED, ModelClient
from tests.fakes.scripted import Scripted
from tests.fakes.upstream import Turn


def test_a_retry_backoff_never_sleeps_past_the_wall_time_left(
    scripted: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failing model is retried with backoff (0.75 s first, with the jitter at its top);
    the budget is 1.5 failed calls' time (measured side by side) plus 0.1 s, so the first
    backoff would outlive it: it is cut to the time left, and the job stops there."""
    scripted.push("warm")  # LiteLLM imports on the first call: not inside the budgets below
    ModelClient("openai/scripted", api_base=scripted.api_base).chat(
        [{"role": "user", "content": "hi"}]
    )
    for _ in range(6):
        scripted.fake.push(Turn(status=500, error="upstream down"))
    one = ModelClient("openai/scripted", api_base=scripted.api_base, retries=0)
    failed_calls = []
    for _ in range(2):  # the reference: a failed call, the slower of two
        started = time.monotonic()
        with pytest.raises(ModelError):
            one.chat([{"role": "user", "content": "hi"}])
        failed_calls.append(time.monotonic() - started)
    budget = Budget(max_seconds=1.5 * max(failed_calls) + 0.1)
    asked: list[tuple[float, float | None]] = []  # (sleep asked, wall time left then)
    real_sleep = time.sleep

    def recording_sleep(seconds: float) -> None:
        asked.append((seconds, budget.remaining_seconds()))
        real_sleep(seconds)

    monkeypatch.setattr(llm.time, "sleep", recording_sleep)
    monkeypatch.setattr(llm.random, "random", lambda: 1.0)
    model = ModelClient("openai/scripted", api_base=scripted.api_base, budget=budget, retries=3)
    with pytest.raises(BudgetExceeded, match="wall-time budget"):
        model.chat([{"role": "user", "content": "hi"}])
    assert asked, "no backoff: the failed call outlived the budget by itself"
    assert all(left is not None and seconds <= left + 1e-3 for seconds, left in asked), (
        asked,
        failed_calls,
    )


def _prompt(tag: str, words: int) -> list[dict[str, str]]:
    text = " ".join(f"{tag}{i} river stone apple" for i in range(words))
    return [{"role": "user", "content": f"{text}\nSay ok."}]


@pytest.mark.skipif(
    __import__("reef_cli.core.embedded", fromlist=["x"]).gguf_path() is None,
    reason="the embedded model is not installed (./install.sh installs it)",
)
def test_the_embedded_model_stops_inside_a_long_prompt_at_the_deadline() -> None:
    """A reference call processes a long prompt unbounded; the same length of prompt
    under a wall-time budget of a quarter of that stops well before the reference's time
    (before the fix it ran the whole prompt, then stopped at the first token)."""
    warm = ModelClient(EMBEDDED, budget=Budget())
    warm.chat([{"role": "user", "content": "hi"}], max_tokens=1)  # load the model first
    started = time.monotonic()
    warm.chat(_prompt("a", 150), max_tokens=1)
    reference = time.monotonic() - started
    bounded = ModelClient(EMBEDDED, budget=Budget(max_seconds=reference / 4))
    started = time.monotonic()
    with pytest.raises(ReefError) as stopped:
        bounded.chat(_prompt("b", 150), max_tokens=1)
    elapsed = time.monotonic() - started
    assert isinstance(stopped.value, BudgetExceeded | ModelError), stopped.value
    assert "wall-time budget" in stopped.value.one_line() or "time limit" in str(stopped.value)
    assert elapsed <= 0.6 * reference, (elapsed, reference)
    # and the model is usable after the abort: a third prompt runs to its answer
    after = warm.chat(_prompt("c", 20), max_tokens=2)
    assert after.completion_tokens >= 1

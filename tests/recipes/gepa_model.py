"""A scripted model on a real port for the GEPA tests (test_gepa_*.py, test_demos.py).

A task call answers a sum with the bare number (1 on ``exact``) only when its system
prompt — the tree — holds ``MARK`` or a demonstrations skill; otherwise a sentence that
ends with the right number (0 on ``exact``). A reflection call, told apart by Reef's
template, proposes ``proposal``. Every request is logged, so a test counts model calls.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from recipes.gepa.reflection import ASK_LINE
from recipes.tasks import Task, TaskSet
from reef_cli.core.budget import Budget
from reef_cli.core.llm import ModelClient
from tests.fakes.server_thread import ServerThread
from tests.fakes.upstream import FakeUpstream, Turn

MARK = "answer with only the number"
GOOD = "Answer with only the number, nothing else."
USELESS = "Think step by step and check the arithmetic twice."
DEMO_MARK = "### Example"  # what recipes.demos writes before each example


class Sums:
    """The scripted model: tasks by the marker, reflections by ``proposal``."""

    def __init__(
        self, proposal: str = USELESS, *, wrong: bool = False, outage: bool = False
    ) -> None:
        self.proposal = proposal
        self.wrong = wrong  # the marker makes the model answer a WRONG bare number
        self.outage = outage  # every task call answers 500
        self.fake = FakeUpstream(chooser=self._choose)
        self.server = ServerThread(self.fake.app, timeout_graceful_shutdown=1)

    @property
    def api_base(self) -> str:
        return self.server.url + "/v1"

    def _choose(self, _path: str, body: dict[str, Any]) -> Turn:
        messages = body.get("messages") or []
        user = str(messages[-1].get("content", ""))
        if ASK_LINE in user:
            return Turn(text=f"Here is the new instruction:\n```\n{self.proposal}\n```")
        if self.outage:
            return Turn(status=500, error="the task model is down")
        system = str(messages[0].get("content", "")) if messages[0].get("role") == "system" else ""
        a, b = (int(n) for n in re.findall(r"\d+", user)[:2])
        if MARK in system.lower() or DEMO_MARK in system:
            return Turn(text=str(a + b + 1 if self.wrong else a + b))
        return Turn(text=f"Let me add {a} and {b}. The sum is {a + b}.")

    def requests(self) -> list[dict[str, Any]]:
        return [e.body for e in self.fake.log if e.path == "/v1/chat/completions"]

    def reflections(self) -> list[dict[str, Any]]:
        return [b for b in self.requests() if ASK_LINE in b["messages"][-1]["content"]]

    def client(self, budget: Budget | None = None, timeout: float = 120.0) -> ModelClient:
        return ModelClient(
            "openai/scripted",
            api_base=self.api_base,
            budget=budget or Budget(),
            retries=0,
            timeout=timeout,
        )


@pytest.fixture(name="model")
def running_sums() -> Iterator[Sums]:
    """A started ``Sums`` (whose reflection proposes the useless rule), as ``model``."""
    scripted = Sums()
    with scripted.server:
        yield scripted


def sums(
    train: int = 4,
    val: int = 3,
    test: int = 6,
    *,
    repeats: int = 1,
    feedback: str | None = None,
    runner: str = "direct",
) -> TaskSet:
    """Sums in three splits, scored ``exact`` (a bare number), lenient ``last_number``."""
    tasks = []
    for split, n, base in (("train", train, 10), ("val", val, 30), ("test", test, 50)):
        for i in range(n):
            a, b = base + i, 2 * i + 3
            tasks.append(
                Task(
                    id=f"{split}-{i}",
                    split=split,
                    prompt=f"What is {a} + {b}?",
                    exact=str(a + b),
                    lenient={"last_number": str(a + b)},
                    feedback=feedback,
                )
            )
    return TaskSet(name="sums", runner=runner, repeats=repeats, tasks=tasks)

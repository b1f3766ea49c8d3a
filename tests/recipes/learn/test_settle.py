"""The simulated user waits for the live loop to have *decided* on her last report.

A run that ended rejected leaves the loop waiting for "a new session"; the loop raises
``scored_sessions`` at once but may count (and so trigger) only on a later poll. The user
must not take that first state as the loop's answer, or her next sessions go to the old
release while the run her report starts is still working (run 11 of docs/results.md).
"""

from __future__ import annotations

from typing import Any

from recipes.learn.live import SimulatedUser
from recipes.personas import resolve

REJECTED = {"job": "job_1", "state": "rejected"}
RUNNING = {"job": "job_2", "state": "running"}
PUBLISHED = {"job": "job_2", "state": "published", "release": 2}


def state(scored: int, counted: int, run: dict[str, Any], waits: str) -> dict[str, Any]:
    return {
        "counts": {"scored_sessions": scored, "counted_sessions": counted},
        "last_run": run,
        "next_trigger": {"waits_for": waits},
    }


class Replayed(SimulatedUser):
    """The user, reading the loop's states from a script instead of a server."""

    def __init__(self, states: list[dict[str, Any]]) -> None:
        super().__init__(resolve("plain-prose"), "http://127.0.0.1:9", "plain-prose")
        self.states = states
        self.read = 0

    def learning(self) -> dict[str, Any]:
        self.read += 1
        return self.states[min(self.read, len(self.states)) - 1]


def test_settle_waits_until_the_count_that_decides_has_seen_the_report() -> None:
    user = Replayed(
        [
            state(6, 5, REJECTED, "retry"),  # raised at once, not yet counted
            state(6, 6, RUNNING, "job"),  # counted: the run this report starts
            state(6, 6, PUBLISHED, "sessions"),
        ]
    )
    try:
        assert user.settle(6, poll_s=0) == PUBLISHED
        assert user.read == 3
    finally:
        user.close()


def test_settle_returns_at_once_when_the_loop_decided_to_wait() -> None:
    user = Replayed([state(6, 6, REJECTED, "retry")])
    try:
        assert user.settle(6, poll_s=0) == REJECTED
        assert user.read == 1
    finally:
        user.close()

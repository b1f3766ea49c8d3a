"""Budgets for a job: model calls, tokens and wall time. Exceeding one stops the job.

One ``Budget`` is shared by everything a job does (drafting, judging, trials, the
agent's own model calls); each model call charges it. A call that would break the call
or time budget is refused before it is made; tokens are known only after a call, so a job
can overshoot the token budget by at most one call's tokens. Wall time is also enforced
by bounding every model call, agent run and retry backoff by the time left
(``remaining_seconds``, ``bounded``); the embedded model is stopped inside a prompt's
processing too, so a job stops within ``max_seconds`` plus one llama.cpp graph node (or
one HTTP round trip cut to the time left), not one whole call.

The limits come from one place: ``DEFAULT_LIMITS`` here, overridden by a recipe's own
``budget``, then by the configured ``max_calls`` / ``max_tokens`` / ``max_seconds``, then
by what the caller passes (``reef evolve --max-calls``, a job's request).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field, fields, replace
from typing import Any

from reef_cli.core.errors import BudgetExceeded, BudgetInvalid


@dataclass(frozen=True)
class BudgetLimits:
    """Limits for one job; ``None`` means "not set here" (the next layer decides)."""

    calls: int | None = None
    tokens: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        for name, flag in (("calls", "--max-calls"), ("tokens", "--max-tokens")):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or int(value) != value or value < 1):
                raise BudgetInvalid(
                    f"{name} budget must be a whole number >= 1 (got {value!r})",
                    f"pass a positive {flag}",
                )
        if self.seconds is not None and not (math.isfinite(self.seconds) and self.seconds > 0):
            raise BudgetInvalid(
                f"wall-time budget must be a positive number of seconds (got {self.seconds!r})",
                "pass a positive --max-seconds",
            )

    def over(self, base: BudgetLimits) -> BudgetLimits:
        """These limits where set, ``base``'s elsewhere."""
        mine = {f.name: getattr(self, f.name) for f in fields(self)}
        return replace(base, **{name: value for name, value in mine.items() if value is not None})

    def budget(self) -> Budget:
        return Budget(max_calls=self.calls, max_tokens=self.tokens, max_seconds=self.seconds)


DEFAULT_LIMITS = BudgetLimits(calls=20, tokens=200_000, seconds=1800.0)


def resolve_limits(
    requested: BudgetLimits | None = None,
    recipe: BudgetLimits | None = None,
    configured: BudgetLimits | None = None,
) -> BudgetLimits:
    """The limits a job runs under: requested > configured > the recipe's > defaults."""
    limits = DEFAULT_LIMITS
    for layer in (recipe, configured, requested):
        if layer is not None:
            limits = layer.over(limits)
    return limits


@dataclass
class Budget:
    max_calls: int | None = None
    max_tokens: int | None = None
    max_seconds: float | None = None
    calls: int = 0
    tokens: int = 0
    started: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def remaining_seconds(self) -> float | None:
        return None if self.max_seconds is None else max(0.0, self.max_seconds - self.elapsed())

    def before_call(self) -> None:
        """Raise if one more call would break the call or time budget."""
        with self._lock:
            if self.max_calls is not None and self.calls + 1 > self.max_calls:
                raise BudgetExceeded(
                    f"model-call budget exhausted ({self.calls}/{self.max_calls} calls); "
                    "nothing was published",
                    "raise it with --max-calls",
                )
            self._check_time()

    def charge(self, tokens: int = 0, calls: int = 1) -> None:
        with self._lock:
            self.calls += calls
            self.tokens += tokens
            if self.max_calls is not None and self.calls > self.max_calls:
                raise BudgetExceeded(
                    f"model-call budget exhausted ({self.calls}/{self.max_calls} calls); "
                    "nothing was published",
                    "raise it with --max-calls",
                )
            if self.max_tokens is not None and self.tokens > self.max_tokens:
                raise BudgetExceeded(
                    f"token budget exhausted ({self.tokens}/{self.max_tokens} tokens); "
                    "nothing was published",
                    "raise it with --max-tokens",
                )
            self._check_time()

    def bounded(self, seconds: float) -> float:
        """``seconds``, cut to the wall time left (so a call or a run cannot outlive it)."""
        remaining = self.remaining_seconds()
        return seconds if remaining is None else max(0.001, min(seconds, remaining))

    def check_time(self) -> None:
        with self._lock:
            self._check_time()

    def _check_time(self) -> None:
        if self.max_seconds is not None and self.elapsed() > self.max_seconds:
            raise BudgetExceeded(
                f"wall-time budget exhausted ({self.elapsed():.0f}s/{self.max_seconds:.0f}s); "
                "nothing was published",
                "raise it with --max-seconds",
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "tokens": self.tokens,
            "seconds": round(self.elapsed(), 3),
            "limits": {
                "calls": self.max_calls,
                "tokens": self.max_tokens,
                "seconds": self.max_seconds,
            },
        }

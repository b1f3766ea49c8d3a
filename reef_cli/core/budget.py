"""Budgets for a job: model calls, tokens and wall time. Exceeding one stops the job.

One ``Budget`` is shared by everything a job does (drafting, judging, trials); each
model call charges it. The check happens before a call when possible (calls, time) and
after it for tokens, so a job can overshoot by at most one call's tokens.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from reef_cli.core.errors import BudgetExceeded


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
            if self.max_tokens is not None and self.tokens > self.max_tokens:
                raise BudgetExceeded(
                    f"token budget exhausted ({self.tokens}/{self.max_tokens} tokens); "
                    "nothing was published",
                    "raise it with --max-tokens",
                )
            self._check_time()

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

"""Which release each scenario serves, cached briefly so the hot path never touches git."""

from __future__ import annotations

import asyncio
import time

from reef_cli.core import scenarios


def served_release(scenario: str) -> int | None:
    """Create the scenario if needed; the number of its served release (None when empty)."""
    release = scenarios.get_or_create(scenario).chain().served()
    return release.number if release else None


class ReleaseCache:
    def __init__(self, ttl: float = 2.0) -> None:
        self.ttl = ttl
        self._values: dict[str, tuple[float, int | None]] = {}
        self._loading: dict[str, asyncio.Future[int | None]] = {}

    def invalidate(self, scenario: str | None = None) -> None:
        if scenario is None:
            self._values.clear()
        else:
            self._values.pop(scenario, None)

    async def get(self, scenario: str) -> int | None:
        hit = self._values.get(scenario)
        if hit is not None:
            if time.monotonic() < hit[0]:
                return hit[1]
            if scenario not in self._loading:  # stale: serve it, refresh in the background
                self._start_load(scenario).add_done_callback(_quiet)
            return hit[1]
        future = self._loading.get(scenario) or self._start_load(scenario)
        return await asyncio.shield(future)

    def _start_load(self, scenario: str) -> asyncio.Future[int | None]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int | None] = loop.create_future()
        self._loading[scenario] = future

        async def load() -> None:
            try:
                value = await asyncio.to_thread(served_release, scenario)
                self._values[scenario] = (time.monotonic() + self.ttl, value)
                future.set_result(value)
            except BaseException as exc:
                future.set_exception(exc)
            finally:
                self._loading.pop(scenario, None)

        task = loop.create_task(load())
        task.add_done_callback(_quiet)
        return future


def _quiet(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()  # mark retrieved: errors reach the awaiting request instead

"""Reading what another replica wrote: it reaches a shared store with that replica's next
batch, milliseconds after its client had the answer. A client may ask this replica about
it at once (a report on the receipt, a Responses turn continuing it), so a lookup that
finds nothing on a shared store is retried for a short while before the answer is "no
such thing". On SQLite no other replica writes: one look is the answer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from reef_cli.core.store import Store

T = TypeVar("T")
WAIT_S = 3.0  # far above a writer's batch interval (~10 ms) under load


async def read_until(
    store: Store | None, read: Callable[[], T], done: Callable[[T], bool], first: T
) -> T:
    """``first`` when ``done(first)``; else ``read()`` (in a thread) again with growing
    pauses until it is done or ``WAIT_S`` passed; returns the last result."""
    if done(first) or store is None or store.kind == "sqlite":
        return first
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    pause, result = 0.01, first
    while not done(result) and loop.time() < deadline:
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.2)
        result = await asyncio.to_thread(read)
    return result

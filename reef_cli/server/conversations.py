"""``previous_response_id`` for upstreams that keep no state: Reef keeps the conversation.

A Responses answer Reef translated has the id ``resp_<hex>`` of its receipt
``rec_<hex>``, so its record *is* the stored turn: the request (its ``input`` and its own
``previous_response_id``) and the response (its ``output``). A conversation is rebuilt by
walking those links back. Recent turns are also kept in memory, so the next request finds
the turn it continues at once, before the recorder has written it (and without a read).
Lookups are scoped to the scenario: another scenario's response id is not found. A
request sent with ``store: false`` is not kept, as the API promises.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from reef_cli.core.records import RecordNotFound
from reef_cli.core.store import Store
from reef_cli.server import replicas
from reef_cli.server import translate_responses as tr

RESPONSE_PREFIX = "resp_"
RECEIPT_PREFIX = "rec_"
MAX_TURNS = 10_000  # a longer chain of previous_response_id is refused as a loop


def response_id_of(receipt: str) -> str:
    return RESPONSE_PREFIX + receipt.removeprefix(RECEIPT_PREFIX)


def receipt_of(response_id: str) -> str | None:
    if not response_id.startswith(RESPONSE_PREFIX):
        return None
    return RECEIPT_PREFIX + response_id.removeprefix(RESPONSE_PREFIX)


@dataclass(frozen=True)
class Turn:
    """One stored answer: its request and response, as they were. The items it adds are
    worked out only when a later request continues it (most answers are never
    continued, so the response path does not pay for it)."""

    scenario: str
    request: dict[str, Any]
    response: dict[str, Any]

    @property
    def previous(self) -> str | None:
        previous = self.request.get("previous_response_id")
        return previous if isinstance(previous, str) else None

    @property
    def items(self) -> list[dict[str, Any]]:
        output = [item for item in self.response.get("output") or [] if isinstance(item, dict)]
        return [*tr.input_items(self.request), *output]


def weigh(value: Any) -> int:
    """The bytes a parsed JSON value holds (its dicts, lists and strings): a cache counts
    what it keeps, so a small request with a 10 MB answer weighs 10 MB, not its request."""
    size = 0
    todo = [value]
    while todo:
        item = todo.pop()
        size += sys.getsizeof(item)
        if isinstance(item, dict):
            todo.extend(item.keys())
            todo.extend(item.values())
        elif isinstance(item, list | tuple):
            todo.extend(item)
    return size


def keeps(request: dict[str, Any]) -> bool:
    """Whether the answer to ``request`` may be continued (``store`` defaults to true)."""
    return request.get("store", True) is not False


class Conversations:
    """Recent turns in memory (at most ``size`` of them weighing ``max_bytes`` in all,
    request and answer), the rest read from the record store."""

    def __init__(self, store: Store | None, size: int = 512, max_bytes: int = 16 << 20) -> None:
        self.store = store
        self.size = size
        self.max_bytes = max_bytes
        self._recent: OrderedDict[str, tuple[Turn, int]] = OrderedDict()
        self._bytes = 0

    @property
    def weight(self) -> int:
        """Bytes the kept turns hold."""
        return self._bytes

    def remember(self, response_id: str, turn: Turn) -> None:
        """Keep ``turn``, weighed by all it holds; one heavier than the whole budget is
        not kept (a later request reads it from the store)."""
        weight = weigh(turn.request) + weigh(turn.response)
        old = self._recent.pop(response_id, None)
        if old is not None:
            self._bytes -= old[1]
        if weight > self.max_bytes:
            return  # it would push out every other turn, and itself
        self._recent[response_id] = (turn, weight)
        self._bytes += weight
        while self._recent and (len(self._recent) > self.size or self._bytes > self.max_bytes):
            _, (_, dropped) = self._recent.popitem(last=False)
            self._bytes -= dropped

    async def history(self, scenario: str, response_id: str) -> list[dict[str, Any]] | None:
        """The items before a request that continues ``response_id`` (oldest first), or
        None when no such response of ``scenario`` is kept."""
        turns: list[Turn] = []
        current: str | None = response_id
        while current is not None:
            if len(turns) >= MAX_TURNS:
                return None
            kept = self._recent.get(current)
            turn = kept[0] if kept is not None else None
            if turn is None:
                read = functools.partial(self._read, current)
                turn = await asyncio.to_thread(read)
                turn = await replicas.read_until(self.store, read, lambda t: t is not None, turn)
            if turn is None or turn.scenario != scenario:
                return None
            turns.append(turn)
            current = turn.previous
        return [item for turn in reversed(turns) for item in turn.items]

    def _read(self, response_id: str) -> Turn | None:
        receipt = receipt_of(response_id)
        if receipt is None or self.store is None:
            return None
        try:
            record = self.store.get(receipt)
        except RecordNotFound:
            return None
        if (
            record.client_dialect != "responses"
            or record.upstream_dialect == "responses"  # the upstream keeps those
            or (record.status or 0) >= 400
            or not isinstance(record.request, dict)
            or not isinstance(record.response, dict)
            or not keeps(record.request)
        ):
            return None
        return Turn(record.scenario, record.request, record.response)

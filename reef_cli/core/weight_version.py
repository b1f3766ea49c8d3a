"""Which weights the engine behind the proxy serves, for reefd (docs/reefd.md).

reefd owns one ``WeightVersion`` and hands it to the proxy. The proxy reads a snapshot
when a request comes (``at_start``) and asks ``note_since`` when it ends: a record that
spanned a swap, or was served while the engine was inconsistent (an update failed
midway), gets a note and is not used to train. Without reefd the proxy has none and
records carry no weight version. Thread-safe and cheap: two attribute reads per request.
"""

from __future__ import annotations

import threading

SPANNED_SWAP = "spanned a weight swap"
INCONSISTENT = "engine inconsistent (a weight update failed midway)"


class WeightVersion:
    def __init__(self, version: str | None = None) -> None:
        self._lock = threading.Lock()
        self.version = version
        self.epoch = 0  # +1 at every swap start and end
        self.swapping = False
        self.consistent = True

    def at_start(self) -> tuple[str | None, int]:
        return self.version, self.epoch

    def note_since(self, epoch: int) -> str | None:
        """Why a request that started at ``epoch`` cannot train (None: it can)."""
        if not self.consistent:
            return INCONSISTENT
        if self.swapping or self.epoch != epoch:
            return SPANNED_SWAP
        return None

    def begin_swap(self) -> None:
        with self._lock:
            self.swapping = True
            self.epoch += 1

    def end_swap(self, version: str | None, *, ok: bool = True) -> None:
        """The swap finished: ``ok`` -> ``version`` is served; not ok -> inconsistent until
        a reload succeeds (``end_swap(v)`` again)."""
        with self._lock:
            if ok:
                self.version = version
                self.consistent = True
            else:
                self.consistent = False
            self.swapping = False
            self.epoch += 1

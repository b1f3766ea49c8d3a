"""One shape for `reef serve`'s background threads (the live loop, chain-remote pulls,
retention): a daemon thread that runs ``run_once`` every ``interval`` seconds until
``stop``, and gives back what the thread held from the store when it ends."""

from __future__ import annotations

import threading

from reef_cli.core.store import Store


class Periodic:
    name = "reef-periodic"
    first_wait = 0.0  # seconds before the first run (0: at once)

    def __init__(self, interval: float, store: Store | None = None) -> None:
        self.interval = interval
        self.store = store
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> object:
        raise NotImplementedError

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Run the next ``run_once`` now instead of at the end of the interval."""
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def _run(self) -> None:
        try:
            if self.first_wait and self._stop.wait(self.first_wait):
                return
            while not self._stop.is_set():
                self._wake.clear()
                self.run_once()
                self._wake.wait(self.interval)
        finally:
            if self.store is not None:
                self.store.release_thread()  # this thread's connection

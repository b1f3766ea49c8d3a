"""Retention inside `reef serve`: records beyond the configured budget
(``records_max_gb``, ``records_max_age_days``) are evicted oldest first, every
``interval`` seconds, by one replica at a time (the store's ``retention`` lock).

What may go is ``core.retention``'s business (never a record a report references or a
release cites); this thread only runs it, and a failure is logged, never raised.
"""

from __future__ import annotations

import logging
import threading

from reef_cli.core.store import Store

log = logging.getLogger("reef.serve")
INTERVAL_S = 600.0


class RetentionTask:
    def __init__(self, store: Store, interval: float = INTERVAL_S) -> None:
        self.store = store
        self.interval = interval
        self.runs = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="reef-retention", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                self.run_once()
        finally:
            self.store.release_thread()

    def run_once(self) -> None:
        from reef_cli.core import retention
        from reef_cli.core.config import load_settings

        try:
            settings = load_settings()
            if settings.records_max_gb is None and settings.records_max_age_days is None:
                return
            with self.store.exclusive("retention") as held:
                if not held:
                    return  # another replica is evicting now
                gone = retention.enforce(self.store, settings)
            if gone.records:
                log.info("retention: evicted %d record(s), %.1f MB", gone.records, gone.bytes / 1e6)
        except Exception as exc:  # the next interval tries again
            log.warning("retention: eviction failed (%s)", type(exc).__name__)
        finally:
            self.runs += 1

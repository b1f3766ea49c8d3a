"""Retention inside `reef serve`: records beyond the configured budget
(``records_max_gb``, ``records_max_age_days``) are evicted oldest first, once soon after
start and then every ``interval`` seconds, by one replica at a time (``core.retention``
holds the store's lock for it).

What may go is ``core.retention``'s business (never a record a report references or a
release cites); this thread only runs it, and a failure is logged, never raised.
"""

from __future__ import annotations

import logging

from reef_cli.core.store import Store
from reef_cli.server.periodic import Periodic

log = logging.getLogger("reef.serve")
INTERVAL_S = 600.0
FIRST_RUN_S = 30.0  # after start-up's own work, not in its way


class RetentionTask(Periodic):
    name = "reef-retention"
    first_wait = FIRST_RUN_S

    def __init__(self, store: Store, interval: float = INTERVAL_S) -> None:
        super().__init__(interval, store)
        self.store: Store = store
        self.runs = 0

    def run_once(self) -> None:
        from reef_cli.core import retention
        from reef_cli.core.config import load_settings

        try:
            gone = retention.enforce(self.store, load_settings())  # one replica at a time
            if gone.records:
                log.info("retention: evicted %d record(s), %.1f MB", gone.records, gone.bytes / 1e6)
        except Exception as exc:  # the next interval tries again
            log.warning("retention: eviction failed (%s)", type(exc).__name__)
        finally:
            self.runs += 1

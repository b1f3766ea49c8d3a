"""``GET /metrics``: what `reef serve` is doing, in Prometheus' text format.

Two kinds of numbers, kept apart because they cost differently:

- **Counted as requests finish** (this process only; each replica counts its own): requests
  by route, dialect, scenario and status, their latency, the time to a stream's first
  chunk and the upstream's errors. The proxy path pays one dictionary lookup and two
  locked increments per request (``bench/proxy_overhead.py --variants no-metrics``
  measures it side by side).
- **Read when scraped** (shared by every replica, from the store and the scenarios'
  files): records and reports, jobs by state, releases by status, the live loop's counts
  and the recorder's backlog. Nothing is counted on the request path for these.

Label values are bounded: a request refused before its scenario was authorised and found
carries ``scenario=""``, an API route is labelled by its template
(``/reef/scenarios/{scenario}/releases``), an unknown path by ``unmatched``, so no caller
can grow the series by inventing names.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Iterator, MutableMapping
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from reef_cli.core import learning_state, proposals, scenarios
from reef_cli.core.store import Store
from reef_cli.server.api import ERRORS, Forbidden, bearer, grant_of
from reef_cli.server.recorder import ROUTES, Exchange, Recorder

log = logging.getLogger("reef.serve")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# An answer can take ten minutes (read_timeout: 600 s) and a refusal a millisecond.
LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
)  # fmt: skip
UNMATCHED = "unmatched"
CLIENT_GONE = 499  # the client left mid-stream: not an upstream error


class Metrics:
    """The counters `reef serve` keeps, in a registry of its own (one per app, so tests and
    replicas in one process never share counts), and the collector that reads the rest at
    scrape time."""

    def __init__(self, state: Any) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Counter(
            "reef_requests",
            "Requests answered, by route, dialect (inference routes), scenario and status.",
            ["route", "dialect", "scenario", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "reef_request_seconds",
            "Seconds from a request's arrival to the end of its answer.",
            ["route", "dialect"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.first_chunk = Histogram(
            "reef_first_chunk_seconds",
            "Seconds from a streamed request's arrival to the upstream's first chunk.",
            ["route", "dialect"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.upstream_errors = Counter(
            "reef_upstream_errors",
            "Exchanges the upstream failed (unreachable, timed out, cut off, or an error "
            "status), by route, dialect and the status the client got.",
            ["route", "dialect", "status"],
            registry=self.registry,
        )
        self.registry.register(_Readings(state))
        # labelled children by their label values: labels() validates on every call
        self._children: dict[tuple[Any, ...], Any] = {}

    def _child(self, metric: Any, *values: str) -> Any:
        key = (id(metric), *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def exchange(self, ex: Exchange) -> None:
        """One proxied exchange is over (answered, failed or abandoned): count it."""
        dialect = ex.client_dialect
        route = ROUTES.get(dialect, dialect)
        status = str(ex.status or 0)
        self._child(self.requests, route, dialect, ex.scenario, status).inc()
        if ex.ended is not None:
            self._child(self.latency, route, dialect).observe(ex.ended - ex.started)
        if ex.stream and ex.first_chunk is not None:
            self._child(self.first_chunk, route, dialect).observe(ex.first_chunk - ex.started)
        if ex.error is not None and ex.status != CLIENT_GONE:
            self._child(self.upstream_errors, route, dialect, status).inc()

    def refused(self, dialect: str, status: int, seconds: float) -> None:
        """An inference request answered before it reached the upstream (no token, a bad
        body, an unknown scenario, a full backlog): its scenario was not authorised or not
        found, so it is counted under ``scenario=""``."""
        route = ROUTES.get(dialect, dialect)
        self._child(self.requests, route, dialect, "", str(status)).inc()
        self._child(self.latency, route, dialect).observe(seconds)

    def api(self, route: str, scenario: str, status: int, seconds: float) -> None:
        """A request to any other route (the API, /metrics itself)."""
        self._child(self.requests, route, "", scenario, str(status)).inc()
        self._child(self.latency, route, "").observe(seconds)

    def render(self) -> bytes:
        """The exposition text; reads the store, so call it off the event loop."""
        return generate_latest(self.registry)


def api_labels(scope: MutableMapping[str, Any], status: int) -> tuple[str, str]:
    """(route template, scenario) for an API request that has been answered. The scenario
    is named only for an answer below 400: a refused one may name anything."""
    route = scope.get("route")
    template = getattr(route, "path", None) or UNMATCHED
    scenario = ""
    if status < 400:
        scenario = str((scope.get("path_params") or {}).get("scenario") or "")
    return template, scenario


class _Readings:
    """The numbers read from the store and the scenarios at scrape time. A part that cannot
    be read (the store away) is left out of that scrape and logged, never a failed scrape."""

    def __init__(self, state: Any) -> None:
        self.state = state

    def describe(self) -> list[Metric]:
        return []  # no description up front: describing would read the store

    def collect(self) -> Iterator[Metric]:
        state = self.state
        store: Store = state.store
        for part in (self._records, self._jobs, self._scenarios):
            try:
                yield from part(store)
            except Exception as exc:  # the scrape goes on without this part
                name = part.__name__.strip("_")
                log.warning("metrics: %s not read: %s", name, type(exc).__name__)
        yield from self._recorder(state.recorder)

    def _records(self, store: Store) -> Iterator[Metric]:
        records = GaugeMetricFamily(
            "reef_records", "Records in the store, by scenario.", labels=["scenario"]
        )
        for size in store.sizes():
            records.add_metric([size.scenario], size.records)
        yield records

    def _jobs(self, store: Store) -> Iterator[Metric]:
        jobs = GaugeMetricFamily(
            "reef_jobs",
            "Evolve jobs by scenario, recipe and state (queued, running, or how they ended: "
            "published, pending, unchanged, rejected, invalid, stopped, failed).",
            labels=["scenario", "recipe", "state"],
        )
        counts = collections.Counter(
            (str(j.get("scenario", "")), str(j.get("recipe", "")), str(j.get("state", "")))
            for j in store.jobs()
        )
        for labels, n in sorted(counts.items()):
            jobs.add_metric(list(labels), n)
        yield jobs

    def _scenarios(self, store: Store) -> Iterator[Metric]:
        reports = GaugeMetricFamily(
            "reef_reports", "Reports (feedback) in the store, by scenario.", labels=["scenario"]
        )
        releases = GaugeMetricFamily(
            "reef_releases",
            "Releases in each scenario's chain, by status (live, pending, promoted, "
            "rejected, ...).",
            labels=["scenario", "status"],
        )
        served = GaugeMetricFamily(
            "reef_served_release", "The release each scenario serves.", labels=["scenario"]
        )
        sessions = GaugeMetricFamily(
            "reef_live_loop_sessions",
            "The live loop's session counts at its last check (eligible, stale, unscored).",
            labels=["scenario", "kind"],
        )
        for scenario in scenarios.list_all():
            name = scenario.name
            reports.add_metric([name], store.report_count(name))
            chain = scenario.chain()
            found = chain.releases()
            states = proposals.states(scenario, found)
            by_status = collections.Counter(proposals.shown_status(r, states) for r in found)
            for status, n in sorted(by_status.items()):
                releases.add_metric([name, status], n)
            current = chain.served()
            if current is not None:
                served.add_metric([name], current.number)
            learning = learning_state.load(scenario.path)
            counts = learning.counts if learning is not None else {}
            for kind in ("eligible", "stale", "unscored"):
                if isinstance(counts.get(kind), int):
                    sessions.add_metric([name, kind], counts[kind])
        yield from (reports, releases, served, sessions)

    def _recorder(self, recorder: Recorder | None) -> Iterator[Metric]:
        if recorder is None:
            return
        pending = GaugeMetricFamily(
            "reef_records_pending",
            "Exchanges journaled and waiting for the store (the journal's depth).",
        )
        pending.add_metric([], recorder.pending)
        backlog = GaugeMetricFamily(
            "reef_record_backlog_bytes", "Bytes of exchanges waiting for the store."
        )
        backlog.add_metric([], recorder.backlog_bytes)
        written = CounterMetricFamily(
            "reef_record_writes",
            "Rows this server's writers (its record writer process, its writer thread) "
            "wrote to the store: one per exchange, plus a stream's `streaming` row before "
            "its end; exchanges replayed from the journal included.",
        )
        written.add_metric([], recorder.writer_written)
        failed = CounterMetricFamily(
            "reef_record_write_failures", "Rows this server's writers could not write."
        )
        failed.add_metric([], recorder.writer_failed)
        yield from (pending, backlog, written, failed)


def install(app: FastAPI) -> None:
    """``GET /metrics``: a token for every scenario (the series name them all), unless
    ``metrics_open`` (loopback binds only, `reef serve` checks)."""
    router = APIRouter()

    def caller(request: Request, creds: Any = Depends(bearer)) -> None:
        if request.app.state.config.metrics_open:
            return
        grant = grant_of(request, creds)
        if grant.scenarios is not None:
            raise Forbidden(
                "/metrics names every scenario: a scenario token may not read it",
                "scrape it with the main token (`reef token`)",
            )

    @router.get(
        "/metrics",
        tags=["health"],
        responses={**ERRORS, 200: {"content": {CONTENT_TYPE: {}}}},
        response_class=PlainTextResponse,
        dependencies=[Depends(caller)],
    )
    def metrics(request: Request) -> Response:
        """Prometheus' text format: requests, latencies and upstream errors counted by this
        process; records, reports, jobs, releases and the live loop read from the store."""
        return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE)

    app.include_router(router)

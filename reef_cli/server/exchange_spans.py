"""A proxied exchange as OpenTelemetry spans, made when it ends from the timestamps the
proxy takes anyway: the request (a SERVER span, the client's ``traceparent`` its parent)
and the upstream call (a CLIENT child, the first chunk an event on it). Attributes name
the receipt, scenario, releases, dialects and statuses; never a message, an error text
(an upstream's may quote the request) or a header."""

from __future__ import annotations

from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from reef_cli.core.tracing import epoch_ns
from reef_cli.server.recorder import ROUTES, Exchange


def record(tracer: Any, ex: Exchange) -> None:
    """The spans of one finished exchange (``ex.ended`` is set)."""
    route = ROUTES.get(ex.client_dialect, ex.client_dialect)
    parent = propagate.extract({"traceparent": ex.traceparent}) if ex.traceparent else None
    ended = epoch_ns(ex.ended if ex.ended is not None else ex.started)
    status = ex.status or 0
    attributes: dict[str, Any] = {
        "http.request.method": "POST",
        "http.route": route,
        "http.response.status_code": status,
        "reef.receipt": ex.id,
        "reef.scenario": ex.scenario,
        "reef.dialect": ex.client_dialect,
        "reef.upstream_dialect": ex.upstream_dialect,
        "reef.stream": ex.stream,
    }
    if ex.release_id is not None:
        attributes["reef.release"] = ex.release_id
    if ex.served_release_id is not None:
        attributes["reef.served_release"] = ex.served_release_id
    span = tracer.start_span(
        f"POST {route}",
        context=parent,
        kind=SpanKind.SERVER,
        start_time=epoch_ns(ex.started),
        attributes=attributes,
    )
    failed = ex.error is not None
    if ex.upstream_started is not None:
        child = tracer.start_span(
            "upstream",
            context=trace.set_span_in_context(span),
            kind=SpanKind.CLIENT,
            start_time=epoch_ns(ex.upstream_started),
            attributes={"reef.upstream_dialect": ex.upstream_dialect},
        )
        if ex.first_chunk is not None:
            child.add_event("first chunk", timestamp=epoch_ns(ex.first_chunk))
        if failed:
            child.set_status(Status(StatusCode.ERROR, f"status {status}"))
        child.end(end_time=ended)
    if failed:
        span.set_attribute("error.type", str(status))
        span.set_status(Status(StatusCode.ERROR, f"status {status}"))
    span.end(end_time=ended)

"""OpenTelemetry traces (the optional extra ``reef[otel]``): a span per proxied request
with the upstream call as its child, and a span per job with one child per step it
reports (the gate's steps among them).

Traces are on when the standard variables name an OTLP endpoint
(``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``) and are not
turned off (``OTEL_SDK_DISABLED=true``, ``OTEL_TRACES_EXPORTER=none``); the exporter reads
the rest (headers, timeout, protocol options) from its own ``OTEL_*`` variables. Spans
carry receipts, scenarios, releases, statuses and timings, never message content, an ask,
a token or a key. Each process (`reef serve`, a job's child) sets its own provider up on
first use; with no endpoint nothing is imported and each call site pays one ``None`` test.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from typing import Any

from reef_cli.core.errors import ExtraMissing

log = logging.getLogger("reef.tracing")

ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
SERVICE = "reef"
_lock = threading.Lock()
_provider: Any = None  # the SDK's TracerProvider, once set up
_tracer: Any = None
_checked = False


class TracingUnavailable(ExtraMissing):
    """An OTLP endpoint is configured but the SDK (``reef[otel]``) is not installed."""


def wanted() -> bool:
    """Whether the environment asks for traces (an endpoint, not turned off)."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(os.environ.get(name, "").strip() for name in ENDPOINTS)


def tracer() -> Any:
    """This process's tracer, or None when traces are off. Raises TracingUnavailable when
    they are asked for and `reef[otel]` is not installed (`reef serve` checks at start;
    a job logs it and runs untraced)."""
    global _checked, _tracer
    if _checked:
        return _tracer
    with _lock:
        if not _checked:
            _tracer = _setup() if wanted() else None
            _checked = True
    return _tracer


def _setup() -> Any:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise TracingUnavailable(
            "an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT) but the OpenTelemetry SDK "
            "is not installed",
            "pip install 'reef[otel]', or unset the OTEL_EXPORTER_OTLP_* variables",
        ) from None
    from opentelemetry.sdk.trace import TracerProvider

    from reef_cli import __version__

    attributes = {"service.version": __version__}
    named = os.environ.get("OTEL_SERVICE_NAME", "").strip()
    if not named and "service.name=" not in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", ""):
        attributes["service.name"] = SERVICE  # else the variables name it, as users expect
    resource = Resource.create(attributes)
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return use(provider)


def use(provider: Any) -> Any:
    """Make ``provider`` this process's (tests hand in one with an in-memory exporter);
    returns its tracer. It is flushed and shut down at exit."""
    global _provider, _tracer, _checked
    from reef_cli import __version__

    _provider, _checked = provider, True
    _tracer = provider.get_tracer("reef", __version__)
    atexit.register(provider.shutdown)
    return _tracer


def reset() -> None:
    """Forget the provider (after flushing it): the next ``tracer()`` reads the
    environment again."""
    global _provider, _tracer, _checked
    with _lock:
        if _provider is not None:
            _provider.shutdown()
        _provider, _tracer, _checked = None, None, False


def flush(timeout_s: float = 5.0) -> None:
    """Export what is pending now (a job's child may be killed right after its job)."""
    if _provider is not None:
        _provider.force_flush(int(timeout_s * 1000))


# perf_counter() seconds -> epoch nanoseconds, for spans made after the fact from the
# timestamps the proxy already takes
_EPOCH_OFFSET_NS = time.time_ns() - time.perf_counter_ns()


def epoch_ns(perf_seconds: float) -> int:
    return _EPOCH_OFFSET_NS + int(perf_seconds * 1e9)

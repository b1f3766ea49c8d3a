"""OpenTelemetry traces (issue 27, item 3): a span per proxied request with the upstream
call as its child, a span per job with its steps, the documented attributes and never a
message's content. Checked with the SDK's in-memory exporter, and end to end through the
OTLP/HTTP exporter to a receiver the test starts."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from reef_cli.core import jobs, tracing
from reef_cli.core.errors import ReefError
from reef_cli.server.receipts import RECORD_HEADER
from tests.fakes.scripted import Scripted, junk_draft
from tests.fakes.upstream import Turn
from tests.server.conftest import ROUTE_BODIES, TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}"}
SECRET_PROMPT = "the-words-of-a-user-that-must-never-reach-a-trace"
CHAT = {
    **ROUTE_BODIES["/v1/chat/completions"],
    "messages": [{"role": "user", "content": SECRET_PROMPT}],
}
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


@pytest.fixture(autouse=True)
def fresh_tracing() -> Iterator[None]:
    tracing.reset()
    yield
    tracing.reset()


@pytest.fixture
def spans() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use(provider)
    return exporter


def _post(stack: Any, headers: dict[str, str] | None = None, **extra: Any) -> httpx.Response:
    return httpx.post(
        stack.url + "/v1/chat/completions",
        json={**CHAT, **extra},
        headers={**AUTH, **(headers or {})},
    )


def test_a_proxied_request_is_a_span_with_the_upstream_call_as_its_child(make_stack, spans):
    stack = make_stack("openai")
    r = _post(stack, {"traceparent": TRACEPARENT})
    assert r.status_code == 200
    receipt = r.headers[RECORD_HEADER]
    found = {s.name: s for s in spans.get_finished_spans()}
    server, upstream = found["POST /v1/chat/completions"], found["upstream"]
    assert f"{server.context.trace_id:032x}" == TRACE_ID  # the client's trace goes on
    assert upstream.parent.span_id == server.context.span_id
    attrs = dict(server.attributes)
    assert attrs["reef.receipt"] == receipt and attrs["reef.scenario"] == "default"
    assert attrs["http.response.status_code"] == 200 and attrs["reef.stream"] is False
    assert attrs["http.route"] == "/v1/chat/completions" and attrs["reef.dialect"] == "openai"
    assert server.start_time <= upstream.start_time <= upstream.end_time <= server.end_time
    everything = "".join(s.to_json() for s in spans.get_finished_spans())
    assert SECRET_PROMPT not in everything and TOKEN not in everything


def test_a_stream_marks_its_first_chunk_and_a_failure_is_an_error(make_stack, spans):
    stack = make_stack("openai")
    with httpx.stream(
        "POST", stack.url + "/v1/chat/completions", json={**CHAT, "stream": True}, headers=AUTH
    ) as r:
        r.read()
    stack.fake.push(Turn(status=500, error=f"upstream echoes {SECRET_PROMPT}"))
    assert _post(stack).status_code == 500
    servers = [s for s in spans.get_finished_spans() if s.name.startswith("POST")]
    streamed, failed = servers
    assert dict(streamed.attributes)["reef.stream"] is True
    upstreams = [s for s in spans.get_finished_spans() if s.name == "upstream"]
    assert [e.name for e in upstreams[0].events] == ["first chunk"]
    assert failed.status.status_code.name == "ERROR"
    assert dict(failed.attributes)["error.type"] == "500"
    assert SECRET_PROMPT not in "".join(s.to_json() for s in spans.get_finished_spans())


def test_a_job_is_a_span_with_a_child_per_step(spans):
    job = jobs.save(jobs.create("shop", "reefine", f"an ask that names {SECRET_PROMPT}"))

    def work(progress: jobs.Progress) -> dict[str, Any]:
        progress(f"drafting: {SECRET_PROMPT}", 0.1)
        progress("gate: validating the tree and scanning for secrets", 0.35)
        progress("evaluation: 3 held-out task(s), both trees", 0.55)
        return {"state": "rejected", "message": "refused"}

    ended = jobs.execute(job, work)
    assert ended.state == "rejected"
    found = spans.get_finished_spans()
    parent = next(s for s in found if s.name == "reef.job")
    steps = [dict(s.attributes)["reef.step"] for s in found if s.name == "reef.job.step"]
    assert steps == ["drafting", "gate", "evaluation"]
    assert all(s.parent.span_id == parent.context.span_id for s in found if s is not parent)
    attrs = dict(parent.attributes)
    assert attrs["reef.job.id"] == job.id and attrs["reef.job.state"] == "rejected"
    assert attrs["reef.recipe"] == "reefine" and attrs["reef.scenario"] == "shop"
    assert SECRET_PROMPT not in "".join(s.to_json() for s in found)


def test_no_endpoint_no_tracer(monkeypatch):
    assert tracing.tracer() is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    tracing.reset()
    assert tracing.tracer() is None


def test_an_endpoint_without_the_sdk_is_one_line(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setitem(__import__("sys").modules, "opentelemetry.sdk.trace", None)
    with pytest.raises(ReefError) as raised:
        tracing.tracer()
    assert "pip install 'reef[otel]'" in raised.value.one_line()


# ---------------------------------------------------------------- end to end, OTLP/HTTP


class _Receiver(BaseHTTPRequestHandler):
    bodies: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        type(self).bodies.append(self.rfile.read(length) if self.path == "/v1/traces" else b"")
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    _Receiver.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    yield _Receiver.bodies
    server.shutdown()
    server.server_close()


def _received(bodies: list[bytes]) -> list[tuple[str, dict[str, Any], str]]:
    """(span name, attributes, service.name) of every span the receiver was sent."""
    out = []
    for body in bodies:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    attrs = {
                        a.key: getattr(a.value, a.value.WhichOneof("value"))
                        for a in span.attributes
                    }
                    out.append((span.name, attrs, service.get("service.name", "")))
    return out


def test_a_request_and_an_evolve_job_reach_an_otlp_receiver(
    make_stack, receiver, scripted: Scripted, monkeypatch: pytest.MonkeyPatch, reef_home: Path
):
    from recipes.engine.worker import run_job
    from reef_cli.core.asks import QUICKSTART_ASK

    stack = make_stack("openai")  # reads OTEL_EXPORTER_OTLP_ENDPOINT: the OTLP exporter
    r = _post(stack)
    assert r.status_code == 200
    receipt = r.headers[RECORD_HEADER]
    # a real Reefine evolve (the quickstart's) on the scripted model, whose junk drafts
    # the gate refuses
    monkeypatch.setenv("REEF_MODEL", "openai/scripted")
    monkeypatch.setenv("REEF_API_BASE", scripted.api_base)
    scripted.push(junk_draft(), junk_draft())
    job = run_job(jobs.create("qs", jobs.QUICKSTART_RECIPE, QUICKSTART_ASK, flow="quickstart"))
    assert job.state == "rejected", job.message
    tracing.flush()
    spans = _received(receiver)
    names = [name for name, _attrs, _service in spans]
    assert "POST /v1/chat/completions" in names and "upstream" in names
    assert "reef.job" in names and "reef.job.step" in names
    server = next(a for n, a, _s in spans if n == "POST /v1/chat/completions")
    assert server["reef.receipt"] == receipt and server["http.response.status_code"] == 200
    job_span = next(a for n, a, _s in spans if n == "reef.job")
    assert job_span["reef.job.id"] == job.id and job_span["reef.job.state"] == job.state
    steps = {a["reef.step"] for n, a, _s in spans if n == "reef.job.step"}
    assert "gate" in steps
    assert {service for _n, _a, service in spans} == {"reef"}
    assert not any(SECRET_PROMPT.encode() in body for body in receiver)

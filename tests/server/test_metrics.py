"""``GET /metrics`` (issue 27, item 2): Prometheus' text format, parsed with
prometheus-client's own parser, its counters matched against the store after a known load,
its auth, and label values no caller can inflate."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from reef_cli.core import jobs, learning_state, scenarios
from reef_cli.core.errors import ServeError
from reef_cli.core.publishing import publish_files
from reef_cli.server.receipts import RECORD_HEADER
from reef_cli.server.run import token_set
from reef_cli.server.serve_config import ServeConfig
from tests.fakes.upstream import Turn
from tests.server.conftest import LIMITED, ROUTE_BODIES, TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}"}
CHAT = ROUTE_BODIES["/v1/chat/completions"]


def scrape(stack: Any, headers: dict[str, str] | None = None) -> dict[str, list[Any]]:
    """{sample name: [samples]} from one scrape, through prometheus-client's parser."""
    r = httpx.get(stack.url + "/metrics", headers=AUTH if headers is None else headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    out: dict[str, list[Any]] = {}
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def value(samples: dict[str, list[Any]], name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(
        s.value
        for s in samples.get(name, [])
        if all(s.labels.get(k) == v for k, v in labels.items())
    )


def post(stack: Any, scenario: str = "default", **extra: Any) -> httpx.Response:
    return httpx.post(
        stack.url + "/v1/chat/completions",
        json={**CHAT, **extra},
        headers={**AUTH, "x-reef-scenario": scenario},
        timeout=30,
    )


def test_counters_match_the_store_after_a_known_load(make_stack):
    stack = make_stack("openai")
    receipts = [post(stack).headers[RECORD_HEADER] for _ in range(5)]
    receipts += [post(stack, "team-a").headers[RECORD_HEADER] for _ in range(3)]
    with httpx.stream(
        "POST",
        stack.url + "/v1/chat/completions",
        json={**CHAT, "stream": True},
        headers={**AUTH, "x-reef-scenario": "team-a"},
    ) as r:
        assert r.status_code == 200
        r.read()
    stack.fake.push(Turn(status=500, error="boom"))
    assert post(stack).status_code == 500
    for rec, score in zip(receipts[:4], (1, 0, 1, 1), strict=True):
        r = httpx.post(
            stack.url + "/reef/report", json={"score": score, "references": [rec]}, headers=AUTH
        )
        assert r.status_code == 201
    stack.flush()

    m = scrape(stack)
    store = stack.store()
    route = "/v1/chat/completions"
    assert value(m, "reef_requests_total", route=route, scenario="default", status="200") == 5
    assert value(m, "reef_requests_total", route=route, scenario="default", status="500") == 1
    assert value(m, "reef_requests_total", route=route, scenario="team-a", status="200") == 4
    assert value(m, "reef_requests_total", route=route, dialect="openai") == 10
    # every counted exchange is a record, and the readings are the store's
    for name in ("default", "team-a"):
        assert value(m, "reef_records", scenario=name) == store.count(name)
        assert value(m, "reef_reports", scenario=name) == store.report_count(name)
    assert value(m, "reef_records") == 10 == value(m, "reef_requests_total", route=route)
    assert value(m, "reef_reports", scenario="default") == 4
    assert value(m, "reef_upstream_errors_total", route=route, status="500") == 1
    assert value(m, "reef_request_seconds_count", route=route) == 10
    assert value(m, "reef_first_chunk_seconds_count", route=route) == 1
    # a histogram's buckets hold every observation at +Inf
    assert value(m, "reef_request_seconds_bucket", route=route, le="+Inf") == 10
    # the API is counted by its route's template
    assert value(m, "reef_requests_total", route="/reef/report", status="201") == 4
    # the recorder: nothing waits after a flush; 11 rows (the stream's opening row too)
    assert value(m, "reef_records_pending") == 0
    assert value(m, "reef_record_writes_total") == 11
    assert "reef_served_release" not in m  # the scenarios were made empty on first use


def test_jobs_and_releases_are_read_from_the_store(make_stack):
    stack = make_stack("openai")
    scenario = scenarios.get_or_create("default")
    rule = "rules/style.md"
    publish_files(scenario, {rule: "Prefer small, tested changes.\n"}, reason="start")
    publish_files(scenario, {rule: "Prefer small changes.\n"}, reason="held", hold="review")
    job = jobs.save(jobs.create(scenario.name, "reefine", "be brief"))
    jobs.fail(job, "scripted")
    jobs.save(jobs.create(scenario.name, "skillclaw", None))
    counts = {"eligible": 3, "stale": 1, "unscored": 2}
    learning_state.save(scenario.path, learning_state.LearningState("default", counts=counts))
    m = scrape(stack)
    for kind, n in counts.items():
        assert value(m, "reef_live_loop_sessions", scenario="default", kind=kind) == n
    assert value(m, "reef_jobs", scenario="default", recipe="reefine", state="failed") == 1
    assert value(m, "reef_jobs", scenario="default", recipe="skillclaw", state="queued") == 1
    assert value(m, "reef_served_release", scenario="default") == 1
    assert value(m, "reef_releases", scenario="default", status="live") == 1
    assert value(m, "reef_releases", scenario="default", status="pending") == 1


def test_refused_requests_never_name_their_scenario(make_stack):
    """A caller cannot add series by inventing scenario names or paths."""
    stack = make_stack("openai", allow_implicit_scenario_creation=False)
    for i in range(5):
        r = post(stack, f"made-up-{i}")
        assert r.status_code == 404
        bad = httpx.post(
            stack.url + "/v1/chat/completions",
            json=CHAT,
            headers={"authorization": "Bearer wrong", "x-reef-scenario": f"other-{i}"},
        )
        assert bad.status_code == 401
        assert httpx.get(stack.url + f"/no/such/path/{i}", headers=AUTH).status_code == 404
        assert httpx.get(stack.url + f"/reef/scenarios/nope-{i}/releases").status_code == 401
    text = httpx.get(stack.url + "/metrics", headers=AUTH).text
    assert "made-up" not in text and "other-" not in text and "nope-" not in text
    m = scrape(stack)
    route = "/v1/chat/completions"
    assert value(m, "reef_requests_total", route=route, scenario="", status="404") == 5
    assert value(m, "reef_requests_total", route=route, scenario="", status="401") == 5
    assert value(m, "reef_requests_total", route="unmatched", status="404") == 5
    releases = "/reef/scenarios/{scenario}/releases"
    assert value(m, "reef_requests_total", route=releases, scenario="", status="401") == 5
    assert value(m, "reef_upstream_errors_total") == 0


def test_the_token_rules(make_stack):
    stack = make_stack("openai")
    url = stack.url + "/metrics"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers={"authorization": "Bearer nope"}).status_code == 401
    scoped = httpx.get(url, headers={"authorization": f"Bearer {LIMITED}"})
    assert scoped.status_code == 403
    assert "main token" in scoped.json()["error"]["hint"]
    open_ = make_stack("openai", metrics_open=True)
    assert httpx.get(open_.url + "/metrics").status_code == 200


def test_metrics_off_counts_nothing_and_hides_the_route(make_stack):
    stack = make_stack("openai", metrics=False)
    assert post(stack).status_code == 200
    assert httpx.get(stack.url + "/metrics", headers=AUTH).status_code == 404
    assert stack.app.state.metrics is None


def test_metrics_open_is_refused_beyond_loopback():
    with pytest.raises(ServeError, match="only loopback binds may set metrics_open"):
        token_set(ServeConfig(host="0.0.0.0", metrics_open=True))


def test_a_store_that_cannot_be_read_leaves_its_part_out(make_stack, caplog):
    stack = make_stack("openai")
    assert post(stack).status_code == 200
    stack.flush()

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError("store away")

    stack.app.state.store.sizes = broken
    m = scrape(stack)
    assert "reef_records" not in m  # that part is left out ...
    assert value(m, "reef_requests_total", scenario="default") == 1  # ... the rest is there
    assert "metrics: records not read: OSError" in caplog.text

"""Property-based run of the Reef API's OpenAPI schema (schemathesis): no 5xx, ever.

Drives schemathesis' strategies with hypothesis directly (its pytest plugin's lazy
fixtures do not work with pytest 9). `/v1/responses` is in the schema too, so generated
Responses requests reach the scripted upstream: a chat one (translated), and in
``test_responses_no_server_errors`` an Anthropic one and a Responses one (relayed).
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from reef_cli.core import scenarios
from tests.fakes.jobs import KeptJobs
from tests.server.conftest import TOKEN

RESPONSES = "POST /v1/responses"


def drive(stack, operations, max_examples: int = 40) -> dict[str, set[int]]:
    """Run each operation's generated cases with and without the token; no 5xx."""
    seen: dict[str, set[int]] = {}

    def make_check(operation):
        @given(case=operation.as_strategy())
        @settings(
            max_examples=max_examples,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        def check(case):
            for headers in ({"authorization": f"Bearer {TOKEN}"}, {}):
                response = case.call(headers=headers, timeout=10)
                seen.setdefault(operation.label, set()).add(response.status_code)
                assert response.status_code < 500, (
                    case.method,
                    case.formatted_path,
                    response.text[:300],
                )

        return check

    for operation in operations:
        make_check(operation)()
    return seen


def operations_of(stack):
    schema = schemathesis.openapi.from_url(stack.url + "/openapi.json")
    return [result.ok() for result in schema.get_all_operations()]


def test_no_server_errors(make_stack):
    stack = make_stack("openai")
    # read per request: /reef/evolve queues a job (with no runner it answers its
    # documented 503, "this server runs no jobs", which is not what this run looks for)
    stack.app.state.jobs = KeptJobs()
    chain = scenarios.create("web").chain()  # something for generated requests to find
    chain.publish({"rules/a.md": "one\n"})
    chain.publish({"rules/a.md": "two\n"})
    operations = operations_of(stack)
    assert len(operations) >= 7
    assert RESPONSES in {operation.label for operation in operations}
    seen = drive(stack, operations)
    # the run reached past auth: some requests were answered, not only refused
    assert any(codes - {401} for codes in seen.values())
    assert 200 in seen[RESPONSES]  # generated Responses requests went through the upstream
    assert any(entry.path == "/v1/chat/completions" for entry in stack.fake.log)


@pytest.mark.parametrize(
    ("dialect", "options", "path"),
    [
        ("anthropic", {}, "/v1/messages"),
        ("openai", {"upstream_responses": True}, "/v1/responses"),
    ],
    ids=["anthropic", "responses"],
)
def test_responses_no_server_errors(make_stack, dialect, options, path):
    stack = make_stack(dialect, **options)
    [operation] = [op for op in operations_of(stack) if op.label == RESPONSES]
    seen = drive(stack, [operation], max_examples=60)
    assert 200 in seen[RESPONSES] and 401 in seen[RESPONSES]
    assert {entry.path for entry in stack.fake.log} == {path}

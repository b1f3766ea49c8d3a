"""Property-based run of the Reef API's OpenAPI schema (schemathesis): no 5xx, ever.

Drives schemathesis' strategies with hypothesis directly (its pytest plugin's lazy
fixtures do not work with pytest 9).
"""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings

from reef_cli.core import scenarios
from tests.server.conftest import TOKEN


def test_no_server_errors(make_stack):
    stack = make_stack("openai")
    chain = scenarios.create("web").chain()  # something for generated requests to find
    chain.publish({"rules/a.md": "one\n"})
    chain.publish({"rules/a.md": "two\n"})
    schema = schemathesis.openapi.from_url(stack.url + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 7
    seen: dict[str, set[int]] = {}

    def make_check(operation):
        @given(case=operation.as_strategy())
        @settings(
            max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None
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
    # the run reached past auth: some requests were answered, not only refused
    assert any(codes - {401} for codes in seen.values())

"""A check's JSON shape: name and status always, detail and findings when there are any."""

from __future__ import annotations

import json

from reef_cli.core.checks import Check


def test_a_check_shows_detail_and_findings_only_when_it_has_them() -> None:
    assert json.dumps(Check("size", "failed", findings=["too big"]).to_json()) == (
        '{"name": "size", "status": "failed", "findings": ["too big"]}'
    )
    assert Check("size", "passed").to_json() == {"name": "size", "status": "passed"}

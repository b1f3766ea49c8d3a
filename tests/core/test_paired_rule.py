"""An outcome's JSON shape (it is what eval reports and the weight gate's record show)."""

from __future__ import annotations

import json

from reef_cli.core.paired_rule import Outcome


def test_an_outcome_shows_status_reason_and_numbers_even_when_empty() -> None:
    assert json.dumps(Outcome("invalid", "no scores").to_json()) == (
        '{"status": "invalid", "reason": "no scores", "numbers": {}}'
    )

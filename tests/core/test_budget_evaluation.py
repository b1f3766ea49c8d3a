from __future__ import annotations

import time

import pytest

from reef_cli.core.budget import Budget
from reef_cli.core.errors import BudgetExceeded
from reef_cli.core.paired_rule import Policy, bootstrap_lower, decide, sign_test_p


def test_call_budget_stops_before_the_extra_call() -> None:
    budget = Budget(max_calls=2)
    for _ in range(2):
        budget.before_call()
        budget.charge(tokens=10)
    with pytest.raises(BudgetExceeded, match="2/2 calls"):
        budget.before_call()


def test_token_and_time_budgets() -> None:
    with pytest.raises(BudgetExceeded, match="token budget"):
        Budget(max_tokens=100).charge(tokens=101)
    budget = Budget(max_seconds=0.01)
    time.sleep(0.02)
    with pytest.raises(BudgetExceeded, match="wall-time"):
        budget.before_call()
    assert Budget(max_calls=5).to_json()["limits"]["calls"] == 5


def test_sign_test_values() -> None:
    assert sign_test_p(5, 0) == pytest.approx(1 / 32)
    assert sign_test_p(0, 0) == 1.0
    assert sign_test_p(3, 3) > 0.5


def both(values: dict[str, tuple[list[float | None], list[float | None]]]):  # type: ignore[no-untyped-def]
    return {t: c for t, (c, _) in values.items()}, {t: i for t, (_, i) in values.items()}


def test_clear_win_passes() -> None:
    cand, inc = both({f"t{i}": ([1.0, 1.0], [0.0, 0.5]) for i in range(6)})
    outcome = decide(cand, inc)
    assert outcome.status == "passed"
    assert outcome.numbers["wins"] == 6 and outcome.numbers["p"] < 0.05


def test_tie_and_loss_do_not_pass() -> None:
    cand, inc = both({f"t{i}": ([0.5, 0.5], [0.5, 0.5]) for i in range(6)})
    assert decide(cand, inc).status == "failed"
    cand, inc = both({f"t{i}": ([0.2], [0.8]) for i in range(6)})
    assert decide(cand, inc).status == "failed"
    cand, inc = both({f"t{i}": ([0.6] if i % 2 else [0.4], [0.5]) for i in range(8)})
    assert decide(cand, inc).status == "failed"


def test_flaky_evaluator_is_invalid_never_a_win() -> None:
    values = {f"t{i}": ([1.0, 1.0], [0.0, 0.0]) for i in range(6)}
    values["t3"] = ([1.0, None], [0.0, 0.0])
    cand, inc = both(values)
    outcome = decide(cand, inc)
    assert outcome.status == "invalid" and "t3" in outcome.reason
    cand, inc = both({"t1": ([float("nan")], [0.0])})
    assert decide(cand, inc).status == "invalid"
    assert decide({}, {}).status == "invalid"


def test_protected_regression_vetoes_an_overall_win() -> None:
    values = {f"t{i}": ([1.0], [0.0]) for i in range(8)}
    values["safety"] = ([0.4], [0.9])
    cand, inc = both(values)
    assert decide(cand, inc).status == "passed"
    outcome = decide(cand, inc, Policy(protected=frozenset({"safety"})))
    assert outcome.status == "failed" and "veto" in outcome.reason


def test_bootstrap_rule_and_min_effect() -> None:
    cand, inc = both({f"t{i}": ([0.9], [0.1]) for i in range(10)})
    assert decide(cand, inc, Policy(method="bootstrap")).status == "passed"
    assert decide(cand, inc, Policy(min_effect=0.9)).status == "failed"
    assert bootstrap_lower([0.0] * 10, 0.05, 500, 1) == 0.0
    noisy, base = both({f"t{i}": ([1.0 if i % 2 else -1.0], [0.0]) for i in range(10)})
    assert decide(noisy, base, Policy(method="bootstrap")).status == "failed"


def test_intervals_are_reported_and_an_aa_comparison_contains_zero() -> None:
    from reef_cli.core.paired_rule import interval

    same = {f"t{i}": [0.1 * i] for i in range(8)}
    outcome = decide(same, same)
    low, high = outcome.numbers["diff_ci95"]
    assert low <= 0 <= high and outcome.status == "failed"
    cand_low, cand_high = outcome.numbers["candidate_ci95"]
    assert cand_low <= outcome.numbers["candidate_mean"] <= cand_high
    low, high = interval([0.0, 1.0] * 20, seed=3)
    assert 0.3 < low < 0.5 < high < 0.7


def test_a_lenient_regression_vetoes_a_scorer_win_unless_tolerated() -> None:
    cand, inc = both({f"t{i}": ([1.0], [0.0]) for i in range(6)})
    lenient = both({f"t{i}": ([0.0] if i < 3 else [1.0], [1.0]) for i in range(6)})
    vetoed = decide(cand, inc, lenient=lenient)
    assert vetoed.status == "failed" and "lenient measure regressed" in vetoed.reason
    assert vetoed.numbers["lenient"]["mean_diff"] == -0.5
    assert "lenient_mean_diff=-0.5" in vetoed.as_check().findings
    tolerated = decide(cand, inc, Policy(lenient_tolerance=0.6), lenient=lenient)
    assert tolerated.status == "passed" and tolerated.numbers["lenient"]["tasks"] == 6
    assert decide(cand, inc, lenient=({}, {})).status == "passed"  # no task names one

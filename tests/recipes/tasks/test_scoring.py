"""Each program scorer, the lenient measure and the feedback GEPA's reflection reads."""

from __future__ import annotations

from typing import Any

import pytest

from recipes.tasks import Task, grade
from recipes.tasks.model import SCORERS, Scorer
from recipes.tasks.scoring import SCORING, answer_part, last_number
from reef_cli.core.budget import Budget
from reef_cli.core.llm import ModelClient
from tests.fakes.scripted import Scripted


def task(**scorer: Any) -> Task:
    return Task(id="t", prompt="4 - 1 - 7 =", **scorer)


@pytest.mark.parametrize(
    ("scorer", "answer", "score"),
    [
        ({"expect": ["failing", "test"]}, "Write a FAILING test", 1.0),
        ({"expect": ["failing", "test"]}, "write a test", 0.5),
        ({"exact": "-4"}, "  -4\n", 1.0),
        ({"exact": "-4"}, "The answer is -4", 0.0),
        ({"exact": "-4"}, "Working: 4-1=3, 3-7=-4. <answer>-4</answer>", 1.0),
        ({"regex": r"^-?\d+$"}, "-4", 1.0),
        ({"regex": r"^-?\d+$"}, "minus four", 0.0),
        ({"contains": "-4"}, "so it is -4.", 1.0),
        ({"last_number": "-4"}, "4 - 1 = 3, then 3 - 7 = -4.", 1.0),
        ({"last_number": "1000"}, "It is 1,000", 1.0),
        ({"last_number": "-4"}, "-4, or maybe 5", 0.0),
    ],
)
def test_program_scorers(scorer: dict[str, Any], answer: str, score: float) -> None:
    run = grade(task(**scorer), answer)
    assert run.score == score and run.answer == answer and run.feedback


def test_reasoning_gym_uses_the_datasets_own_score_answer() -> None:
    pytest.importorskip("reasoning_gym")
    entry = {"question": "4 - 1 - 7 =", "answer": "-4", "metadata": {}}
    spec = {"reasoning_gym": {"dataset": "chain_sum", "entry": entry}}
    assert grade(task(**spec), "-4").score == 1.0
    partial = grade(task(**spec), "The answer is -4").score
    assert partial is not None and 0 < partial < 1  # reasoning-gym rewards a bare answer
    assert "expected '-4'" in grade(task(**spec), "5").feedback


def test_the_lenient_measure_is_scored_beside_the_scorer() -> None:
    t = task(exact="-4", lenient={"last_number": "-4"})
    verbose = grade(t, "4 - 1 = 3 and 3 - 7 = -4")
    assert (verbose.score, verbose.lenient) == (0.0, 1.0)
    assert "lenient last_number: 1.00" in verbose.feedback
    wrong_but_terse = grade(t, "5")
    assert (wrong_but_terse.score, wrong_but_terse.lenient) == (0.0, 0.0)


def test_no_answer_is_an_outage_not_a_zero() -> None:
    run = grade(task(exact="-4"), None)
    assert run.score is None and "no answer" in run.feedback


def test_feedback_quotes_a_bounded_answer() -> None:
    run = grade(task(exact="-4"), "x" * 5000)
    assert len(run.feedback) < 400


def test_judge_scorer_records_a_judge_score(scripted: Scripted) -> None:
    scripted.push('{"score": 0.7, "reason": "Names the cause, thin on the fix."}')
    judge = ModelClient("openai/scripted", api_base=scripted.api_base, budget=Budget(), retries=0)
    run = grade(task(judge="Names the root cause."), "The cause is X.", judge=judge)
    assert run.score == 0.7 and run.judged and "judge 0.70" in run.feedback
    assert judge.budget.calls == 1


def test_a_judge_outage_is_no_score(scripted: Scripted) -> None:
    scripted.push("not json", "still not json", "nope")
    judge = ModelClient("openai/scripted", api_base=scripted.api_base, budget=Budget(), retries=0)
    run = grade(task(judge="Names the root cause."), "The cause is X.", judge=judge)
    assert run.score is None and "no score" in run.feedback
    assert grade(task(judge="r"), "a").score is None  # no judge model at all


def test_helpers() -> None:
    assert answer_part("a <answer> 1 </answer> b <answer>2</answer>") == "2"
    assert answer_part(" plain ") == "plain"
    assert last_number("no digits") is None and last_number("x -3.5 y") == -3.5


def test_every_scorer_in_the_format_has_one_row_in_the_table() -> None:
    """A scorer is its field on ``Scorer`` and its row in ``SCORING``: neither without the
    other (a field with no row would be accepted in a file and fail at the first answer)."""
    assert set(SCORERS) == set(SCORING)
    assert "timeout_s" not in SCORERS and "exact" in SCORERS
    assert Scorer(exact="1").kind == "exact"

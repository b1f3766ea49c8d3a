"""Accepted answers become demonstrations, chosen on validation (recipes/demos.py), and a
GEPA search starts from them when they beat the served tree on val."""

from __future__ import annotations

import random
import string

from recipes import demos, engine
from recipes.demos import (
    SKILL_PATH,
    Selection,
    choose_demos,
    demos_of,
    select,
    skill_files,
    subsets,
)
from recipes.skillclaw.signals import Scored
from recipes.tasks import DirectRunner
from reef_cli.core import scenarios
from reef_cli.core.checks import static_checks
from reef_cli.core.evidence import WITHHELD, Feedback, SessionEvidence, Turn
from reef_cli.core.publishing import publish_files
from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.core.tree import starter_tree
from tests.fakes.records import scored_exchange
from tests.recipes.gepa_model import (
    Sums,
    running_sums,  # noqa: F401  (the `model` fixture)
    sums,
)

RNG = random.Random(2424)


def planted_key() -> str:
    """A fake OpenAI project key, assembled at run time (no key-shaped literal here)."""
    alphabet = string.ascii_letters + string.digits
    return "sk-" + "proj-" + "".join(RNG.choice(alphabet) for _ in range(56))


def session(n: int, request: str, answer: str, score: float | None = 1.0) -> SessionEvidence:
    reports = [] if score is None else [Feedback(f"r{n}", score, "", f"t{n}")]
    return SessionEvidence(
        key=f"session:s{n}",
        scenario="demo",
        session_id=f"s{n}",
        receipts=[f"rec{n}"],
        release=1,
        first_at=f"t{n}",
        last_at=f"t{n}",
        turns=[Turn("user", request), Turn("assistant", answer)],
        reports=reports,
    )


def shown(files: dict[str, str] | None) -> str:
    return (files or {}).get(SKILL_PATH, "")


def test_the_subset_that_scores_best_on_validation_is_chosen() -> None:
    """Only the example answered in the user's form ("PLAIN") helps on validation."""
    accepted = [
        session(1, "What is 2 + 2?", "**The answer** is 4."),
        session(2, "What is 3 + 5?", "PLAIN 8"),
        session(3, "What is 1 + 6?", "- step one\n- 7"),
        session(4, "What is 9 + 1?", "**Sum**\n10"),
    ]
    calls: list[str] = []

    def score_tree(files: dict[str, str]) -> float:
        text = shown(files)
        calls.append(text)
        return 0.9 if "PLAIN" in text and "**" not in text and "- " not in text else 0.2

    chosen = select(accepted, score_tree, k=3, seed=5, trials=6)
    assert chosen.files is not None and chosen.chosen == ["session:s2"]
    assert chosen.baseline == 0.2 and chosen.score == 0.9
    assert calls[0] == ""  # the tree without demonstrations is scored first
    assert len(calls) == 1 + len(chosen.tried) <= 7
    skill = shown(chosen.files)
    assert "Request:\nWhat is 3 + 5?\n\nAnswer:\nPLAIN 8" in skill
    assert static_checks({**starter_tree().files(), **chosen.files}).passed
    # the same arguments, the same choice
    assert select(accepted, score_tree, k=3, seed=5, trials=6).files == chosen.files
    assert subsets(4, 3, 5, 6) == subsets(4, 3, 5, 6)


def test_ties_go_to_fewer_then_shorter_examples_and_none_beats_nothing() -> None:
    accepted = [
        session(1, "What is 2 + 2?", "The answer is four, as two and two make four."),
        session(2, "What is 3 + 5?", "8"),
        session(3, "What is 1 + 6?", "7, since one and six make seven."),
    ]
    same = choose_demos(accepted, lambda files: 0.5 if files else 0.0, k=3, seed=0, trials=8)
    skill = shown(same)
    assert skill.count("### Example") == 1 and "Answer:\n8" in skill  # fewest, shortest
    assert choose_demos(accepted, lambda files: 0.5, k=3) is None  # no subset beats none
    assert choose_demos([], lambda files: 1.0) is None


def test_only_accepted_readable_sessions_are_used_once_each() -> None:
    pool = demos_of(
        [
            session(1, "What is 2 + 2?", "4", score=0.0),  # rejected
            session(2, "What is 3 + 5?", "8", score=None),  # never scored
            session(3, "What is 1 + 6?", WITHHELD),  # an answer that may not be shown
            session(4, "What is 9 + 1?", "10"),
            session(5, "what is 9  + 1?", "ten"),  # the same request, newer
            Scored(session(6, "What is 7 + 7?", "14"), "S6", 1.0, "reported"),  # SkillClaw's
        ]
    )
    assert [d.key for d in pool] == ["session:s6", "session:s5"]
    long = demos_of([session(7, "x " * 2000, "y " * 2000)])[0]
    assert len(long.request) <= demos.REQUEST_CHARS and len(long.answer) <= demos.ANSWER_CHARS


def test_a_session_whose_text_holds_a_credential_is_never_included() -> None:
    key = planted_key()
    leaky_answer = session(1, "What is 2 + 2?", f"4 (I used OPENAI_API_KEY={key})")
    leaky_request = session(2, f"Use {key} and tell me 3 + 5", "8")
    leaky_report = session(3, "What is 1 + 6?", "7")
    leaky_report.reports.append(Feedback("x", 1.0, f"thanks, key {key}", "t3"))
    withheld = session(4, "What is 9 + 1?", "10")
    withheld.withheld = 1
    withheld.turns.append(Turn("user", WITHHELD))
    clean = session(5, "What is 7 + 7?", "14")
    sessions = [leaky_answer, leaky_request, leaky_report, withheld, clean]
    assert [d.key for d in demos_of(sessions)] == ["session:s5"]
    seen: list[str] = []

    def score_tree(files: dict[str, str]) -> float:
        seen.append(shown(files))
        return 1.0 if files else 0.0

    files = choose_demos(sessions, score_tree, k=5, trials=10)
    assert files is not None and "14" in shown(files)
    assert not any(key in text for text in seen)  # not even a tried subset held it
    assert skill_files([]) == {}


# ------------------------------------------------------------------ GEPA's second seed


def seed_session(scenario: str, sid: str, ask: str, answer: str, score: float) -> None:
    scored_exchange(SQLiteStore(), scenario, sid, ask, answer, score=score)


def test_gepa_starts_from_the_accepted_answers_when_they_win_on_val(model: Sums) -> None:
    """The model answers the bare number only with demonstrations in its prompt; the
    reflection never finds a better rule. So the demonstrations seed is what wins val,
    and the gate publishes it on test."""
    scenarios.create("demo")
    publish_files("demo", starter_tree().files(), reason="start")
    seed_session("demo", "a1", "What is 2 + 2?", "4", 1.0)
    seed_session("demo", "a2", "What is 6 + 1?", "7", 1.0)
    seed_session("demo", "r1", "What is 5 + 5?", "It is 10.", 0.0)  # not accepted
    seed_session("demo", "k1", "What is 3 + 3?", f"6, with {planted_key()}", 1.0)
    seed_session("demo", "v1", "What is 30 + 3?", "33", 1.0)  # a val task's own prompt
    llm = model.client()
    outcome = engine.run(
        scenarios.get("demo"),
        engine.recipe_named("gepa", {"max_metric_calls": 40}),
        model=llm,
        task_runner=DirectRunner(llm),
        tasks=sums(),
    )
    assert outcome.state == "published", outcome.message
    gepa = outcome.evidence["gepa"]
    assert gepa["start"] == "demonstrations"
    assert gepa["seed_val_score"] == 0.0 and gepa["best_val_score"] == 1.0
    used = gepa["demos"]
    assert used["baseline"] == 0.0 and used["score"] == 1.0
    assert set(used["pool"]) == {"session:a1", "session:a2"}  # no credential, no val prompt
    chain = scenarios.get("demo").chain()
    files = chain.files(chain.get(2))
    assert files[SKILL_PATH].count("### Example") == len(used["chosen"]) >= 1
    assert "What is 30 + 3?" not in files[SKILL_PATH]
    summaries = [c["summary"] for c in outcome.evidence["changes"]]
    assert f"GEPA added {SKILL_PATH} (chosen on val)" in summaries
    # the served tree's val pass for the demos baseline was GEPA's: reused, not repeated
    assert gepa["calls_saved"] >= 3


def test_the_demos_option_turns_the_seed_off(model: Sums) -> None:
    scenarios.create("demo")
    publish_files("demo", starter_tree().files(), reason="start")
    seed_session("demo", "a1", "What is 2 + 2?", "4", 1.0)
    llm = model.client()
    outcome = engine.run(
        scenarios.get("demo"),
        engine.recipe_named("gepa", {"max_metric_calls": 30, "demos": False}),
        model=llm,
        task_runner=DirectRunner(llm),
        tasks=sums(),
    )
    assert outcome.state == "rejected"
    assert outcome.evidence["gepa"]["start"] == "served" and "demos" not in outcome.evidence["gepa"]


def test_a_selection_shows_everything_but_the_files() -> None:
    assert list(Selection(None, ["s1"]).to_json().items()) == [
        ("pool", ["s1"]),
        ("baseline", None),
        ("tried", []),
        ("chosen", []),
        ("score", None),
    ]

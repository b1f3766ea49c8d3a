"""SkillClaw's complaint path: what a person said about failed answers -> one rule or fact
per complaint, merged without loss, each citing its reports (recipes/skillclaw/rules.py).

The unit tests build ``Scored`` sessions by hand; the end-to-end tests run the engine
against the scripted model of test_skillclaw (told apart by system prompt) on a seeded
store, and read the published release.
"""

from __future__ import annotations

import json
import re

from recipes.skillclaw import decide, rules
from recipes.skillclaw.signals import Scored
from recipes.tasks.runners import render_harness
from reef_cli.core import scenarios
from reef_cli.core.evidence import Feedback, SessionEvidence
from reef_cli.core.llm import ModelClient
from tests.fakes.upstream import Turn as Reply
from tests.recipes.skillclaw.test_skillclaw import (
    MARKER,
    Claw,
    demo,
    mark_of,
    releases,
    run,
    seed_session,
)

PLAIN = f"Please write plain sentences and mention {MARKER}."
FACT = "A glorp has 5 legs."


def scored(key: str, score: float, *texts: str) -> Scored:
    session = SessionEvidence(
        key=key,
        scenario="demo",
        session_id=key,
        receipts=[f"rec-{key}"],
        release=1,
        first_at="",
        last_at="",
        reports=[Feedback(f"rep-{key}-{i}", score, text, "") for i, text in enumerate(texts)],
    )
    return Scored(session, f"S{key}", score=score, source="reported", feedback=list(texts))


def line(kind: str, text: str) -> Reply:
    return Reply(text=json.dumps({"kind": kind, "text": text}))


# ------------------------------------------------------------------ units


def test_equal_complaints_are_one_citing_every_report_and_successes_say_nothing() -> None:
    found = rules.complaints(
        [
            scored("a", 0.0, "Please write plain sentences. That total is wrong."),
            scored("b", 0.0, "please  write plain sentences"),
            scored("c", 1.0, "Please write plain sentences."),  # accepted: not a complaint
        ]
    )
    texts = {c.text: c for c in found}
    assert set(texts) == {"Please write plain sentences.", "That total is wrong."}
    plain = texts["Please write plain sentences."]
    assert plain.reports == ["rep-a-0", "rep-b-0"] and plain.sessions == ["a", "b"]
    assert found[0] is plain  # the most cited first


def test_verbatim_keeps_facts_drops_please_and_refuses_bare_verdicts() -> None:
    assert rules.verbatim(FACT) == ("fact", FACT)
    assert rules.verbatim("Please use British spelling.") == ("rule", "Use British spelling.")
    for verdict in ("That total is wrong.", "No, that's incorrect.", "Wrong answer."):
        assert rules.verbatim(verdict) is None


def test_a_line_that_drifts_from_the_complaint_is_not_used() -> None:
    said = "Our staging server listens on port 8443."
    good = rules.Line(kind="fact", text="The staging server listens on port 8443.")
    assert rules.faithful(good, said)
    for drift in (
        "The staging server listens on port 8080.",  # a number changed
        "Always write tests first.",  # about something else
        "",
    ):
        assert not rules.faithful(rules.Line(kind="fact", text=drift), said)


def test_apply_merges_equal_lines_appends_new_ones_and_never_drops_one() -> None:
    first = [
        rules.Learned("rule", "Write plain sentences.", "", ["r1"], ["a"], "model"),
        rules.Learned("fact", FACT, FACT, ["r2"], ["b"], "verbatim"),
    ]
    files = rules.apply({}, first)
    assert set(files) == {rules.RULES_PATH, rules.FACTS_PATH}
    assert "- Write plain sentences. <!-- reports: r1 -->" in files[rules.RULES_PATH]
    assert f"- {FACT} <!-- reports: r2 -->" in files[rules.FACTS_PATH]
    many = [f"r{i}" for i in range(3, 12)]
    second = [
        rules.Learned("rule", "write plain  sentences", "", many, ["c"], "model"),
        rules.Learned("rule", "End with the total.", "", ["r20"], ["d"], "model"),
    ]
    again = rules.apply(files, second)
    assert second[0].merged and not second[1].merged
    body = again[rules.RULES_PATH]
    kept = [ln for ln in body.splitlines() if ln.startswith("- ")]
    assert len(kept) == 2 and kept[0].startswith("- Write plain sentences. <!-- reports: r1, r3")
    assert "+4 more" in kept[0]  # 10 citations: 6 listed, 4 counted
    assert kept[1] == "- End with the total. <!-- reports: r20 -->"
    third = rules.apply(
        again, [rules.Learned("rule", "Write plain sentences.", "", ["r1"], [], "")]
    )
    assert third == {}  # the same line with a citation it has: nothing changes


def test_citations_never_reach_the_model() -> None:
    files = rules.apply({}, [rules.Learned("rule", "Be brief.", "", ["rep_1"], [], "model")])
    shown = render_harness(files)
    assert "Be brief." in shown and "rep_1" not in shown and "<!--" not in shown


def test_a_model_outage_falls_back_to_the_complaints_own_words() -> None:
    down = ModelClient("openai/none", api_base="http://127.0.0.1:9/v1", retries=0, timeout=2)
    learned = rules.learn(down, rules.Complaint("Please use British spelling.", ["r1"], ["a"]))
    assert learned is not None
    assert (learned.kind, learned.text, learned.made_by) == (
        "rule",
        "Use British spelling.",
        "verbatim",
    )


# ------------------------------------------------------------------ through the engine


def seed_complaints(
    n: int = 5, feedback: str = f"{PLAIN} That total is wrong. {FACT}"
) -> list[str]:
    receipts = []
    for i in range(1, n + 1):
        receipts += seed_session(
            "demo", f"c{i}", ask=f"count the legs of group {i}", skills=(), feedback=feedback
        )
    return receipts


def seed_complaints_from(first: int, n: int = 1) -> None:
    for i in range(first, first + n):
        seed_session(
            "demo",
            f"c{i}",
            ask=f"count the legs of group {i}",
            skills=(),
            feedback=f"{PLAIN} That total is wrong. {FACT}",
        )


def test_complaints_become_a_published_rule_and_fact_citing_their_reports(claw: Claw) -> None:
    demo()
    seed_complaints()
    claw.lines.extend(
        [line("rule", f"Write plain sentences and mention {MARKER}."), line("fact", FACT)]
    )
    outcome = run(claw)
    assert outcome.state == "published", outcome.message
    chain = scenarios.get("demo").chain()
    files = chain.files(chain.get(2))
    preferences, facts = files[rules.RULES_PATH], files[rules.FACTS_PATH]
    assert f"- Write plain sentences and mention {MARKER}." in preferences
    assert f"- {FACT}" in facts
    cited = re.findall(r"<!-- reports: (.*?) -->", preferences)[0].split(", ")
    notes = outcome.evidence["skillclaw"]
    assert len(cited) == 5 and all(c.startswith("rep_") for c in cited)
    lines = {entry["text"]: entry for entry in notes["lines"]}
    assert lines[FACT]["kind"] == "fact" and len(lines[FACT]["reports"]) == 5
    # the bare verdict made no line and no model call: two complaints, two calls
    assert len(claw.bodies(rules.SYSTEM)) == 2
    assert "That total is wrong." not in preferences + facts
    # the rule reached the replay's system prompt; the citation did not
    replayed = [b for b in claw.bodies() if MARKER in json.dumps(b["messages"][:1])]
    assert replayed and all("rep_" not in json.dumps(b["messages"][:1]) for b in replayed)


def test_a_second_batch_saying_the_same_merges_and_is_not_published_for_a_citation(
    claw: Claw,
) -> None:
    """Saying it again adds citations, not behaviour: the replay ties, nothing is
    published, and the served release keeps every line."""
    demo()
    seed_complaints()
    claw.lines.extend(
        [line("rule", f"Write plain sentences and mention {MARKER}."), line("fact", FACT)]
    )
    assert run(claw).state == "published"
    for i in range(6, 11):
        seed_session("demo", f"c{i}", ask=f"count legs {i}", skills=(), feedback=PLAIN)
    claw.lines.append(line("rule", f"Write plain sentences and mention {MARKER}."))
    outcome = run(claw)
    assert outcome.state == "rejected" and "0 wins / 0 losses" in outcome.message
    (merged,) = outcome.evidence["skillclaw"]["lines"]
    assert merged["merged"] is True and len(merged["reports"]) == 5
    chain = scenarios.get("demo").chain()
    assert releases() == [1, 2]
    files = chain.files(chain.get(2))
    assert f"mention {MARKER}" in files[rules.RULES_PATH] and FACT in files[rules.FACTS_PATH]


def test_a_batch_with_too_few_rejected_answers_is_held_until_one_more_comes(claw: Claw) -> None:
    """A replayed request the person accepted can only tie: with four rejected answers
    and three accepted, no candidate could ever pass the sign test, so the batch is kept
    (no model call, the mark unmoved) and the next rejected answer makes it publishable."""
    demo()
    seed_complaints(n=4)
    for i in range(3):
        seed_session("demo", f"ok{i}", ask=f"count legs {i}", skills=(), score=1.0, feedback=None)
    held = run(claw)
    assert held.state == "unchanged", held.message
    assert held.message.startswith("4 of 7 replayable session(s) were not accepted")
    assert claw.bodies() == [] and mark_of() == {}
    seed_complaints_from(5)
    claw.lines.extend(
        [line("rule", f"Write plain sentences and mention {MARKER}."), line("fact", FACT)]
    )
    outcome = run(claw)
    assert outcome.state == "published", outcome.message
    numbers = outcome.evidence["evaluation"]["numbers"]
    assert (numbers["tasks"], numbers["wins"], numbers["ties"]) == (8, 5, 3)
    assert len(mark_of()) == 8


def test_a_batch_the_person_accepted_throughout_ends_unchanged_and_is_consumed(
    claw: Claw,
) -> None:
    """Five accepted answers: nothing to learn, no decision asked for; the run ends
    ``unchanged`` (not ``rejected``: no candidate failed) and the batch is read."""
    demo()
    for i in range(5):
        seed_session("demo", f"ok{i}", ask=f"count legs {i}", skills=(), score=1.0, feedback=None)
    outcome = run(claw)
    assert outcome.state == "unchanged", outcome.message
    assert outcome.message == "nothing new to learn from"
    assert claw.bodies(decide.SYSTEM) == [] and len(mark_of()) == 5

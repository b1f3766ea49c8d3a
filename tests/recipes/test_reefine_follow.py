"""Reefine's follow check: a change is published only when the model follows it on check
prompts derived from the ask more often than it follows the served release.

The model is the scripted one on a real port. Where a test needs the answers to depend on
the tree, the script reads the system prompt as a model would: with the rule in it, the
answer writes a failing test first; without it, it just fixes the code. The verdict
("does this answer follow: <ask>?") is then read off the answer it is shown, blind to the
tree that wrote it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from recipes import engine
from recipes.reefine.draft import Draft
from recipes.reefine.follow import GENERIC, check_prompts
from reef_cli.core import scenarios
from reef_cli.core.publishing import publish_files
from reef_cli.core.release_page import render_page
from reef_cli.core.tree import starter_tree
from tests.fakes.scripted import Scripted, draft_json, follows, is_follow_request
from tests.fakes.upstream import Turn
from tests.recipes.engine.test_engine import ASK, StandIn, client, releases

MARKER = "reef-e2e-7c1d"  # in the scripted draft's rule
FOLLOWING = "I will first write a failing test that reproduces the bug, then fix the code."
IGNORING = "I will change the code so the bug goes away and tell you what I changed."


@pytest.fixture(autouse=True)
def demo() -> None:
    scenarios.create("demo")
    publish_files("demo", starter_tree().files(), reason="start")


def reads_its_system_prompt(scripted: Scripted, *, obeys: bool = True) -> None:
    """Check-prompt answers that follow the rule when it is in the system prompt (and
    ``obeys``); verdicts that say whether the answer they are shown writes a test first."""
    fallback = scripted.fake.chooser

    def choose(path: str, body: dict[str, Any]) -> Turn | None:
        messages = body.get("messages") or []
        if is_follow_request(body):
            asked = messages[-1]["content"]  # "Request: …\nAnswer: …\nDoes this answer follow: …"
            shown = asked.split("\nAnswer: ", 1)[1].rsplit("\nDoes this answer follow:", 1)[0]
            return Turn(text=follows("failing test" in shown, "read off the answer"))
        if messages and messages[-1]["content"] in PROMPTS and "response_format" not in body:
            system = messages[0]["content"] if messages[0]["role"] == "system" else ""
            return Turn(text=FOLLOWING if obeys and MARKER in system else IGNORING)
        return fallback(path, body) if fallback else None

    scripted.fake.chooser = choose


PROMPTS = check_prompts(ASK, Draft.model_validate_json(draft_json()))


def run(scripted: Scripted, **budget: Any) -> engine.Outcome:
    return engine.run(
        scenarios.get("demo"),
        engine.recipe_named("reefine"),
        model=client(scripted, **budget),
        ask=ASK,
        runner=StandIn(),
    )


def test_a_followed_change_is_published_with_its_prompts_answers_and_verdicts(
    scripted: Scripted,
) -> None:
    scripted.push(draft_json())
    scripted.push_judge(0.9, 0.9)
    reads_its_system_prompt(scripted)
    outcome = run(scripted)
    assert outcome.state == "published", outcome.message
    meta = scenarios.get("demo").chain().get(2).meta.model_dump()
    checks = {c["name"]: c for c in meta["gate"]["checks"]}
    assert checks["follow"] == {
        "name": "follow",
        "status": "passed",
        "detail": "followed on 3 of 3 check prompt(s) with the change, 0 of 3 with r1: 3 "
        "win(s), 0 loss(es), 0 tie(s) (needs more wins than losses, at least one)",
    }
    follow = meta["follow"]
    assert (follow["wins"], follow["losses"], follow["ties"]) == (3, 0, 0)
    assert follow["question"] == f"does this answer follow: {ASK}?"
    assert [c["prompt"] for c in follow["checks"]] == PROMPTS
    for compared in follow["checks"]:
        assert compared["served"]["answer"] == IGNORING and not compared["served"]["follows"]
        assert compared["candidate"]["answer"] == FOLLOWING and compared["candidate"]["follows"]
        assert compared["result"] == "win"
    # the prompts come from the ask's situation and never state the rule (the probe trap)
    assert all(
        p.startswith(("Please fix a bug", "I need you to fix a bug", "Next task: fix"))
        for p in PROMPTS
    )
    assert not any("test" in p for p in PROMPTS)
    # each answer had its tree as the system prompt: the change only on the candidate's side
    answered = [
        e.body for e in scripted.inference() if e.body["messages"][-1]["content"] in PROMPTS
    ]
    with_rule = [MARKER in json.dumps(b["messages"][0]) for b in answered]
    assert with_rule == [False, True] * 3
    assert all(b["temperature"] == 0 for b in answered + [e.body for e in scripted.follow_calls()])
    # the release page shows the check and its counts
    page = render_page("demo", 2)
    assert "followed on 3 of 3 check prompt(s)" in page and "Please fix a bug" in page
    assert meta["budget"]["calls"] == 3 + 12


def test_a_change_the_answers_ignore_is_rejected_naming_the_follow_check(
    scripted: Scripted,
) -> None:
    """The rule loads (the trial passes) but the model answers as if it were not there."""
    scripted.push(draft_json())
    scripted.push_judge(0.9, 0.9)
    reads_its_system_prompt(scripted, obeys=False)
    outcome = run(scripted)
    assert outcome.state == "rejected"
    assert outcome.message == (
        "the change is not followed: follow: followed on 0 of 3 check prompt(s) with the "
        "change, 0 of 3 with r1: 0 win(s), 0 loss(es), 3 tie(s) (needs more wins than losses, "
        "at least one); nothing published"
    )
    assert "\n" not in outcome.message
    assert releases() == [1]
    checks = {c["name"]: c["status"] for c in outcome.verdict["checks"]}
    assert checks["trial"] == "passed" and checks["follow"] == "failed"
    assert [c["candidate"]["answer"] for c in outcome.evidence["follow"]["checks"]] == [
        IGNORING
    ] * 3


@pytest.mark.parametrize(
    ("verdicts", "counts", "state"),
    [
        ((True, True, False, False, False, True), (1, 0, 2), "published"),
        ((False, True, True, False, False, True), (2, 1, 0), "published"),
        ((True, True, True, True, True, True), (0, 0, 3), "rejected"),
        ((False, False, False, False, False, False), (0, 0, 3), "rejected"),
        ((False, True, True, False, True, True), (1, 1, 1), "rejected"),
        ((True, False, True, False, False, True), (1, 2, 0), "rejected"),
    ],
    ids=["1-win-2-ties", "2-wins-1-loss", "all-followed-both", "none", "1-1-1", "1-win-2-losses"],
)
def test_wins_losses_and_ties_are_counted_per_prompt(
    scripted: Scripted, verdicts: tuple[bool, ...], counts: tuple[int, int, int], state: str
) -> None:
    """Verdicts per prompt: the served tree's, then the change's."""
    scripted.push(draft_json())
    scripted.push_judge(0.9, 0.9)
    scripted.push_follow(*verdicts)
    outcome = run(scripted)
    assert outcome.state == state, outcome.message
    found = outcome.evidence["follow"]
    assert (found["wins"], found["losses"], found["ties"]) == counts
    assert found["served_followed"] == sum(verdicts[0::2])
    assert found["candidate_followed"] == sum(verdicts[1::2])
    assert releases() == ([1, 2] if state == "published" else [1])


def test_a_judge_that_gives_no_verdict_makes_the_job_invalid(scripted: Scripted) -> None:
    scripted.push(draft_json())
    scripted.push_judge(0.9, 0.9)
    scripted.push_follow("not json", "still not", "[]")
    outcome = run(scripted)
    assert outcome.state == "invalid"
    assert "follow: no answer or verdict on check prompt 1" in outcome.message
    assert "no valid answer in 3 tries" in outcome.message and releases() == [1]


def test_the_follow_check_is_charged_to_the_job_budget(scripted: Scripted) -> None:
    scripted.push(draft_json())
    scripted.push_judge(0.9, 0.9)
    scripted.push_follow(*[False, True] * 3)
    outcome = run(scripted, max_calls=3 + 5)  # the draft, two judges and 5 of the 12
    assert outcome.state == "stopped" and "model-call budget" in outcome.message
    assert outcome.evidence["budget"]["calls"] == 8 == len(scripted.inference())
    assert releases() == [1]


def draft(kind: str, name: str = "a-change", description: str = "Write the changelog") -> Draft:
    return Draft(kind=kind, name=name, description=description, body="x" * 20, why="asked")


@pytest.mark.parametrize(
    ("ask", "kind", "first"),
    [
        (ASK, "rule", "Please fix a bug. What will you do?"),
        ("always run the linter before you commit", "rule", "Please commit. What will you do?"),
        ("when a test fails, read the whole error first", "rule", "A test fails. What do you do?"),
        ("never force-push to main", "rule", "Please force-push to main."),
        ("always answer in British English", "rule", GENERIC[0]),
        ("add a /changelog command from the git log", "command", "/changelog"),
        ("add a skill for writing the changelog", "skill", "I need to write the changelog."),
    ],
)
def test_check_prompts_come_from_the_ask_and_are_the_same_each_time(
    ask: str, kind: str, first: str
) -> None:
    prompts = check_prompts(ask, draft(kind, "changelog"))
    assert len(prompts) == 3 and len(set(prompts)) == 3
    assert prompts[0].startswith(first)
    assert prompts == check_prompts(ask, draft(kind, "changelog"))

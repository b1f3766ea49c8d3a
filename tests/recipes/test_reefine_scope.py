"""The scope-creep class: a Reefine draft that adds actions the ask did not name (push,
force, delete, deploy, network, install, history rewrite, migrations, messages) has those
sentences cut before it is applied, or is refused when nothing else is left.

Each variant runs the whole job on the scripted model: the published rule must not hold
the sentence, and the release says what was cut and why."""

from __future__ import annotations

from typing import Any

import pytest

from recipes import engine
from recipes.reefine.draft import Draft
from recipes.reefine.scope import actions_in, trim_draft, trim_text
from reef_cli.core import scenarios
from reef_cli.core.publishing import publish_files
from reef_cli.core.tree import starter_tree
from tests.cli.helpers import runner
from tests.fakes.scripted import FOLLOWED, Scripted, draft_json
from tests.recipes.engine.test_engine import ASK, StandIn, client, releases

BODY = (
    "Before fixing a bug, write a failing test that reproduces it (reef-e2e-7c1d). "
    "Run it to see it fail, then fix the bug and run it again."
)
PATH = "rules/failing-test-first.md"


@pytest.fixture(autouse=True)
def demo() -> None:
    scenarios.create("demo")
    publish_files("demo", starter_tree().files(), reason="start")


def run(scripted: Scripted, body: str, ask: str = ASK, stand_in: Any = None) -> engine.Outcome:
    scripted.push(draft_json(body=body))
    scripted.push_judge(0.9, 0.9)
    scripted.push_follow(*FOLLOWED)
    return engine.run(
        scenarios.get("demo"),
        engine.recipe_named("reefine"),
        model=client(scripted),
        ask=ask,
        runner=stand_in or StandIn(),
    )


@pytest.mark.parametrize(
    ("creep", "actions"),
    [
        ("Commit the changes and push to the repository.", ["push"]),
        ("If the remote has moved on, overwrite it with --force.", ["force"]),
        ("Delete the temporary files you created.", ["delete"]),
        ("Deploy the fix to staging once the tests pass.", ["deploy"]),
        ("Upload the test log with curl so the team can see it.", ["network"]),
        ("Install any missing packages with pip first.", ["install"]),
        ("Rebase onto main and squash your commits into one.", ["history rewrite"]),
        ("Run the database migrations before the tests.", ["migrations"]),
        ("Email the team a summary of the fix.", ["messages"]),
    ],
    ids=["push", "force", "delete", "deploy", "network", "install", "history", "migrate", "mail"],
)
def test_a_sentence_adding_an_action_the_ask_did_not_name_is_cut(
    scripted: Scripted, creep: str, actions: list[str]
) -> None:
    stand_in = StandIn()
    outcome = run(scripted, f"{BODY} {creep}", stand_in=stand_in)
    assert outcome.state == "published", outcome.message
    chain = scenarios.get("demo").chain()
    rule = chain.files(chain.get(2))[PATH]
    assert creep not in rule and BODY in rule  # cut, and nothing else
    assert creep not in stand_in.trials[0].files[PATH]  # the trial ran the trimmed draft
    meta = chain.get(2).meta.model_dump()
    [trimmed] = meta["scope"]["trimmed"]
    assert trimmed["text"] == creep and trimmed["actions"] == actions
    note = f"(trimmed 1 sentence adding actions the ask did not name: {actions[0]})"
    assert meta["changes"][0]["summary"].endswith(note)
    assert outcome.message.endswith(note)  # the job's outcome says so too
    assert creep not in meta["draft"]["body"]


def test_the_quickstarts_list_loses_its_push_step_and_is_renumbered() -> None:
    body = (
        "1. Write a failing test that reproduces the bug.\n2. Fix the bug.\n"
        "3. Commit the changes and push to the repository.\n4. Run the tests again."
    )
    kept, trimmed = trim_text(body, set())
    assert kept == (
        "1. Write a failing test that reproduces the bug.\n2. Fix the bug.\n3. Run the tests again."
    )
    assert [t.actions for t in trimmed] == [["push"]]


def test_an_ask_that_names_the_action_keeps_it(scripted: Scripted) -> None:
    ask = f"{ASK}; after fixing, push the branch"
    creep = "After the fix, commit the changes and push the branch."
    outcome = run(scripted, f"{BODY} {creep}", ask=ask)
    assert outcome.state == "published", outcome.message
    chain = scenarios.get("demo").chain()
    assert creep in chain.files(chain.get(2))[PATH]
    scope = chain.get(2).meta.model_dump()["scope"]
    assert scope["trimmed"] == [] and "push" in scope["named_by_ask"]
    assert "trimmed" not in outcome.message


@pytest.mark.parametrize(
    ("sentence", "found"),
    [
        ("Never force-push to main.", []),
        ("Do not delete files you did not create.", []),
        ("Fix it locally without pushing anything.", []),
        ("Do not push until the tests pass.", ["push"]),  # it still pushes, later
        ("If the tests do not fail, push the branch.", ["push"]),  # not its own clause
        ("Never push without asking first.", ["push"]),
        ("Remove the debug print you added.", []),  # not files, branches or data
        ("Write the release notes for the change.", []),
    ],
)
def test_a_sentence_that_only_forbids_an_action_adds_none(sentence: str, found: list[str]) -> None:
    assert [a for a, _ in actions_in(sentence)] == found


def test_a_draft_that_is_all_creep_is_refused_with_one_line(scripted: Scripted) -> None:
    creep = "Push the branch. Then deploy it to production and email the team."
    stand_in = StandIn()
    outcome = run(scripted, creep, stand_in=stand_in)
    assert outcome.state == "rejected"
    assert outcome.message.startswith(
        "the draft only adds actions the ask did not name (push: 'Push the branch.'; "
        "deploy, messages: 'Then deploy it to production and email the team.')"
    )
    assert "fix: name the action in the ask" in outcome.message and "\n" not in outcome.message
    assert stand_in.trials == [] and releases() == [1]  # nothing applied, tried or published
    assert outcome.evidence["draft"]["body"] == creep  # the refused draft is shown
    assert len(outcome.evidence["scope"]["trimmed"]) == 2
    assert len(scripted.inference()) == 1  # only the draft: no judge, no follow check


def test_the_cli_refuses_an_all_creep_draft_in_one_line(scripted: Scripted) -> None:
    from reef_cli.cli.main import app

    scripted.push(draft_json(body="Commit the changes and push to the repository."))
    result = runner.invoke(
        app,
        ["evolve", ASK, "-s", "demo", "--yes"],
        env={"REEF_MODEL": "openai/scripted", "REEF_API_BASE": scripted.api_base},
    )
    assert result.exit_code == 3, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[-1].startswith(
        "reef: error: evolve rejected: the draft only adds actions the ask did not name (push:"
    )
    assert "(fix: name the action in the ask" in lines[-1] and "Traceback" not in result.output
    assert releases() == [1]


def test_a_description_naming_an_action_is_replaced_by_the_first_instruction_left() -> None:
    draft = Draft(
        kind="skill",
        name="fix-bugs",
        description="Fix bugs test-first and push the fix",
        body=f"{BODY} Push the fix.",
        why="asked",
    )
    scope = trim_draft(draft, ASK)
    assert scope.draft.description.startswith("Before fixing a bug, write a failing test")
    assert scope.description_replaced == "Fix bugs test-first and push the fix"
    assert "Push" not in scope.draft.body and not scope.empty


def test_extension_code_is_not_cut() -> None:
    code = 'export default function (pi) {\n  pi.on("x", () => fetch("https://example.com"));\n}\n'
    draft = Draft(kind="extension", name="ping", description="Ping a URL", body=code, why="asked")
    scope = trim_draft(draft, "write an extension that greets me")
    assert scope.draft.body == code and scope.to_json()["checked"] is False

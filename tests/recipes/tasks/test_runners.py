"""DirectRunner: one model call per task with the tree as the system prompt (or in the
user turn), graded; an outage is no score; the budget is charged and enforced."""

from __future__ import annotations

import pytest

from recipes.tasks import DirectRunner, Task, render_harness
from reef_cli.core.budget import Budget
from reef_cli.core.errors import BudgetExceeded
from reef_cli.core.llm import ModelClient
from tests.fakes.scripted import Scripted
from tests.fakes.upstream import Turn

TREE = {
    "reef.toml": "format = 1\n",
    "rules/b-terse.md": "Answer with only the number.\n",
    "rules/a-first.md": "---\ndescription: x\n---\nThink first.\n",
    "skills/sums/SKILL.md": (
        "---\nname: sums\ndescription: Adding numbers\n---\nAdd left to right.\n"
    ),
    "commands/go.md": "---\ndescription: go\n---\nGo.\n",
}
TASK = Task(id="t", prompt="1 + 2 =", exact="3", lenient={"last_number": "3"})


def client(scripted: Scripted, **budget: int) -> ModelClient:
    return ModelClient(
        "openai/scripted", api_base=scripted.api_base, budget=Budget(**budget), retries=0
    )


def test_render_harness_is_rules_then_skills_without_frontmatter() -> None:
    text = render_harness(TREE)
    assert text.index("Think first.") < text.index("Answer with only") < text.index("## Skill")
    assert "description: x" not in text and "Adding numbers" in text and "Go." not in text
    assert render_harness({"reef.toml": "format = 1\n"}) == ""


def test_the_tree_is_the_system_prompt_and_the_answer_is_graded(scripted: Scripted) -> None:
    scripted.push("3")
    run = DirectRunner(client(scripted)).run_task(TREE, TASK)
    assert (run.score, run.lenient, run.answer) == (1.0, 1.0, "3")
    body = scripted.inference()[-1].body
    assert body["messages"][0]["role"] == "system"
    assert "Answer with only the number." in body["messages"][0]["content"]
    assert body["messages"][1] == {"role": "user", "content": "1 + 2 ="}
    assert body["temperature"] == 0.0


def test_harness_in_user_puts_the_tree_above_the_prompt(scripted: Scripted) -> None:
    scripted.push("1 + 2 is 3")
    run = DirectRunner(client(scripted), harness_in="user").run_task(TREE, TASK)
    assert (run.score, run.lenient) == (0.0, 1.0)
    messages = scripted.inference()[-1].body["messages"]
    assert len(messages) == 1 and messages[0]["role"] == "user"
    assert messages[0]["content"].startswith("Think first.")
    assert messages[0]["content"].endswith("1 + 2 =")


def test_an_empty_tree_sends_only_the_prompt(scripted: Scripted) -> None:
    scripted.push("3")
    DirectRunner(client(scripted)).run_task({}, TASK)
    assert scripted.inference()[-1].body["messages"] == [{"role": "user", "content": "1 + 2 ="}]


def test_a_model_outage_is_no_score(scripted: Scripted) -> None:
    scripted.fake.push(Turn(status=500, error="down"))
    run = DirectRunner(client(scripted)).run_task(TREE, TASK)
    assert run.score is None and "outage" in run.feedback


def test_the_call_budget_stops_the_job(scripted: Scripted) -> None:
    scripted.push("3")
    runner = DirectRunner(client(scripted, max_calls=1))
    assert runner.run_task(TREE, TASK).score == 1.0
    with pytest.raises(BudgetExceeded):
        runner.run_task(TREE, TASK)
    assert len(scripted.inference()) == 1

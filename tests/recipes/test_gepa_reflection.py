"""GEPA's reflection reads what the user said: each way a complaint reaches a task (the
task's ``feedback``, SkillClaw's replay rubric, a report on a recorded session that asked
the same prompt) shows as "The user said: …" next to the score, and the prompt a small
model gets is short, has one worked example and asks for one fenced block."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from recipes import engine
from recipes.gepa.components import Layout
from recipes.gepa.heard import complaint_of, read
from recipes.gepa.reflection import (
    ASK_LINE,
    WORKED_TEXT,
    extract,
    messages_for,
    prompt_for,
)
from recipes.gepa.search import Meter, ReefAdapter
from recipes.skillclaw.replay import rubric
from recipes.skillclaw.signals import Scored
from recipes.tasks import DirectRunner, Task, TaskRun
from reef_cli.core import scenarios
from reef_cli.core.evidence import SessionEvidence
from reef_cli.core.publishing import publish_files
from reef_cli.core.reports import ReportIn, save_report
from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.core.tree import starter_tree
from tests.fakes.records import chat_answer, chat_record
from tests.recipes.gepa_model import GOOD, Sums, sums

COMPLAINT = "Give only the number, no sentence."


@pytest.fixture
def model() -> Iterator[Sums]:
    scripted = Sums(proposal=GOOD)
    scripted.server.start()
    try:
        yield scripted
    finally:
        scripted.server.stop()


def records_for(tasks: list[Task], scores: list[float | None]) -> list[dict[str, object]]:
    """The reflective records of one evaluation of the starter tree on ``tasks``."""
    runs = iter(scores)

    def run_task(files: dict[str, str], task: Task) -> TaskRun:
        score = next(runs)
        return TaskRun(score, "The sum is 13.", "expected exactly '13'; answer 'The sum is 13.'")

    layout = Layout.of(starter_tree().files())
    adapter = ReefAdapter(layout, run_task, Meter(100, 1), lambda _used: None)
    batch = adapter.evaluate(tasks, layout.seed, capture_traces=True)
    return list(adapter.make_reflective_dataset(layout.seed, batch, ["rules/x.md"])["rules/x.md"])


def test_a_tasks_feedback_is_shown_as_what_the_user_said_next_to_the_score() -> None:
    task = Task(id="t", split="train", prompt="What is 10 + 3?", exact="13", feedback=COMPLAINT)
    [record] = records_for([task], [0.0])
    prompt = prompt_for("rules/x.md", "Be brief.", [record])
    assert f'Score: 0.00\nThe user said: "{COMPLAINT}"\nFeedback: expected exactly' in prompt


def test_a_replay_rubric_carries_the_persons_words() -> None:
    """SkillClaw's replay tasks judge against a rubric quoting the report's feedback."""
    session = SessionEvidence("session:s1", "demo", "s1", ["r1"], 1, "t0", "t1")
    scored = Scored(session, "S1", 0.0, "reported", feedback=[COMPLAINT])
    task = Task(id="replay-s1", split="train", prompt="What is 10 + 3?", judge=rubric(scored))
    assert complaint_of(task) == COMPLAINT
    [record] = records_for([task], [0.2])
    assert f'The user said: "{COMPLAINT}"' in prompt_for("rules/x.md", "Be brief.", [record])
    plain = Task(id="t", split="train", prompt="p", judge="A good answer is short.")
    assert complaint_of(plain) is None


def test_a_report_on_a_session_that_asked_the_same_prompt_is_the_complaint() -> None:
    scenarios.create("demo")
    store = SQLiteStore()
    rec = chat_record(
        "demo",
        {"messages": [{"role": "user", "content": "What is  10 + 3?"}]},
        chat_answer("The sum is 13."),
        session_id="s1",
        release_id=1,
    )
    store.insert_many([rec])
    save_report(store, ReportIn(score=0, feedback=COMPLAINT, references=[rec.id]), None)
    heard = read("demo")
    task = Task(id="t", split="train", prompt="what is 10 + 3?", exact="13")
    assert heard.complaint(task) == COMPLAINT  # case and spacing do not matter
    other = Task(id="u", split="train", prompt="What is 10 + 4?", exact="14")
    assert heard.complaint(other) is None


def test_the_user_is_not_quoted_on_an_answer_that_kept_every_point() -> None:
    tasks = [
        Task(id=f"t{i}", split="train", prompt=f"What is {i} + 3?", exact="13", feedback=COMPLAINT)
        for i in range(2)
    ]
    lost, kept = records_for(tasks, [0.0, 1.0])
    assert lost["User said"] == COMPLAINT and kept["User said"] is None
    assert "The user said" not in prompt_for("rules/x.md", "Be brief.", [kept])


def test_the_prompt_has_one_worked_example_and_asks_for_one_fenced_block() -> None:
    task = Task(id="t", split="train", prompt="What is 10 + 3?", exact="13", feedback=COMPLAINT)
    records = records_for([task] * 4, [0.0] * 4)
    messages = messages_for("rules/x.md", "Be brief.", records)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == f"```\n{WORKED_TEXT}\n```"
    assert messages[0]["content"].endswith(ASK_LINE) and messages[2]["content"].endswith(ASK_LINE)
    assert sum(len(m["content"]) for m in messages) < 3000  # short, for a 1.5B model
    # echoing the worked example's answer is no proposal
    assert extract(f"```\n{WORKED_TEXT}\n```", "Be brief.") is None


def test_the_reflection_a_search_sends_quotes_the_user(model: Sums) -> None:
    scenarios.create("demo")
    publish_files("demo", starter_tree().files(), reason="start")
    llm = model.client()
    outcome = engine.run(
        scenarios.get("demo"),
        engine.recipe_named("gepa", {"max_metric_calls": 30}),
        model=llm,
        task_runner=DirectRunner(llm),
        tasks=sums(feedback=COMPLAINT),
    )
    assert outcome.state == "published", outcome.message
    [first, *_] = model.reflections()
    shown = first["messages"][-1]["content"]
    assert f'Score: 0.00\nThe user said: "{COMPLAINT}"' in shown
    assert outcome.evidence["gepa"]["complaints"] == 7  # every train and val task has one


def test_a_task_feedback_field_is_checked() -> None:
    with pytest.raises(ValueError, match="feedback"):
        Task(id="t", prompt="p", exact="1", feedback="")

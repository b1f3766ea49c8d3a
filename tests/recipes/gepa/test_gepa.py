"""The GEPA recipe on the real gepa engine, against a scripted model on a real port.

The task model answers a sum with the bare number only when its system prompt (the
tree) holds ``MARK``; otherwise it answers in a sentence that ends with the right
number — 0 on ``exact``, 1 on the lenient ``last_number``. The reflection call, told
apart by Reef's template, proposes whatever the test chose. So GEPA can only win by
finding the marker rule, and every number below is known in advance.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from recipes import engine
from recipes.gepa.components import SEED_BODY, SEED_PATH, Layout
from recipes.gepa.recipe import Gepa
from recipes.gepa.reflection import ASK_LINE, extract, prompt_for
from recipes.gepa.search import Meter, ReefAdapter, _Refused
from recipes.tasks import DirectRunner, Task, TaskRun, TaskSet
from reef_cli.core import scenarios
from reef_cli.core.budget import Budget
from reef_cli.core.errors import BudgetInvalid, ReefError
from reef_cli.core.publishing import publish_files
from reef_cli.core.tree import starter_tree
from tests.cli.helpers import reef, runner
from tests.fakes.server_thread import ServerThread
from tests.recipes.gepa_model import GOOD, USELESS, Sums


@pytest.fixture
def model() -> Iterator[Sums]:
    scripted = Sums(GOOD)
    with scripted.server:
        yield scripted


def sums(scorer: str = "exact", train: int = 4, val: int = 3, test: int = 6) -> TaskSet:
    """Sums in three splits; ``regex`` scores the format only (a bare number)."""
    tasks = []
    for split, n, base in (("train", train, 10), ("val", val, 30), ("test", test, 50)):
        for i in range(n):
            a, b = base + i, 2 * i + 3
            main: dict[str, Any] = (
                {"exact": str(a + b)} if scorer == "exact" else {"regex": r"^\s*-?\d+\s*$"}
            )
            tasks.append(
                Task(
                    id=f"{split}-{i}",
                    split=split,
                    prompt=f"What is {a} + {b}?",
                    lenient={"last_number": str(a + b)},
                    **main,
                )
            )
    return TaskSet(name="sums", runner="direct", repeats=1, tasks=tasks)


def demo(name: str = "demo") -> str:
    scenarios.create(name)
    publish_files(name, starter_tree().files(), reason="start")
    return name


class Recording:
    """A task runner that records the split of every task it ran, in order."""

    def __init__(self, inner: DirectRunner) -> None:
        self.inner = inner
        self.splits: list[str] = []

    def run_task(self, files: dict[str, str], task: Task) -> TaskRun:
        self.splits.append(task.split)
        return self.inner.run_task(files, task)


def evolve(
    model: Sums,
    options: dict[str, Any],
    tasks: TaskSet | None = None,
    scenario: str = "demo",
) -> tuple[engine.Outcome, Recording]:
    llm = model.client(timeout=20)
    recording = Recording(DirectRunner(llm))
    outcome = engine.run(
        scenarios.get(scenario),
        engine.recipe_named("gepa", options),
        model=llm,
        task_runner=recording,
        tasks=tasks or sums(),
    )
    return outcome, recording


def releases(scenario: str = "demo") -> list[int]:
    return [r.number for r in scenarios.get(scenario).chain().releases()]


def test_gepa_finds_the_rule_and_the_gate_publishes_it_on_test_numbers(
    model: Sums,
) -> None:
    demo()
    outcome, recording = evolve(model, {"max_metric_calls": 30})
    assert outcome.state == "published", outcome.message
    chain = scenarios.get("demo").chain()
    release = chain.get(2)
    files = chain.files(release)
    meta = release.meta.model_dump()
    assert meta["source"] == "recipe:gepa"
    assert meta["reason"] == "GEPA: val 0.000 -> 1.000 on 3 val tasks"
    # the rewritten body sits under its old frontmatter; the other files are untouched
    start = starter_tree().files()
    changed = [p for p in files if files[p] != start.get(p)]
    assert len(changed) == 1 and GOOD in files[changed[0]]
    assert all(files[p] == start[p] for p in start if p not in changed)
    assert meta["changes"] == [
        {
            "kind": "rule" if changed[0].startswith("rules/") else "skill",
            "name": changed[0].split("/")[1].removesuffix(".md"),
            "path": changed[0],
            "why": meta["reason"],
            "summary": f"GEPA rewrote {changed[0]}",
        }
    ]
    # the verdict holds the held-out evaluation's numbers
    checks = {c["name"]: c for c in meta["gate"]["checks"]}
    assert checks["evaluation"]["status"] == "passed"
    assert "tasks=6" in checks["evaluation"]["findings"]
    numbers = meta["evaluation"]["numbers"]
    assert meta["evaluation"]["split"] == "test"
    assert (numbers["candidate_mean"], numbers["incumbent_mean"], numbers["wins"]) == (1, 0, 6)
    assert numbers["lenient"]["candidate_mean"] == numbers["lenient"]["incumbent_mean"] == 1
    # GEPA's evidence
    gepa = meta["gepa"]
    assert gepa["gepa_version"] == "0.1.4" and gepa["seed"] == 0
    assert (gepa["train"], gepa["val"], gepa["minibatch"]) == (4, 3, 3)
    assert (gepa["seed_val_score"], gepa["best_val_score"]) == (0.0, 1.0)
    assert gepa["components"] == ["rules/working-style.md", "skills/write-tests/SKILL.md"]
    assert gepa["seeded"] is None and gepa["outages"] == 0
    assert gepa["reflection_calls"] == len(model.reflections()) >= 1
    best = gepa["lineage"][gepa["best_candidate"]]
    assert best["val_score"] == 1.0 and best["parents"] == [0] and best["changed"] == changed
    assert gepa["lineage"][0] == {"candidate": 0, "parents": [], "val_score": 0.0, "changed": []}
    # the search ran on train and val only; the gate ran the test split after it
    first_test = recording.splits.index("test")
    assert "test" not in recording.splits[:first_test]
    assert set(recording.splits[first_test:]) == {"test"}
    assert len(recording.splits[first_test:]) == 6 * 1 * 2  # tasks x repeats x both trees
    assert len(recording.splits[:first_test]) == gepa["metric_calls"] <= 30
    # every model call the server saw — task runs and reflections — was charged
    assert meta["budget"]["calls"] == len(model.requests())


def test_the_same_seed_gives_the_same_release(model: Sums) -> None:
    trees = []
    for name in ("first", "second"):
        demo(name)
        outcome, _ = evolve(model, {"max_metric_calls": 30, "seed": 7}, scenario=name)
        assert outcome.state == "published", outcome.message
        chain = scenarios.get(name).chain()
        meta = chain.get(2).meta.model_dump()
        trees.append((chain.files(chain.get(2)), meta["gepa"]["lineage"], meta["reason"]))
    assert trees[0] == trees[1]


def test_an_empty_tree_is_seeded_with_a_neutral_rule(model: Sums) -> None:
    scenarios.create("empty")
    outcome, _ = evolve(model, {"max_metric_calls": 30}, scenario="empty")
    assert outcome.state == "published", outcome.message
    chain = scenarios.get("empty").chain()
    files = chain.files(chain.get(1))
    assert files[SEED_PATH] == GOOD + "\n"
    assert outcome.evidence["gepa"]["seeded"] == SEED_PATH
    assert outcome.evidence["gepa"]["components"] == [SEED_PATH]
    assert outcome.evidence["changes"][0]["summary"] == f"GEPA added {SEED_PATH}"


def test_no_rule_that_helps_publishes_nothing_and_keeps_the_evidence(
    model: Sums,
) -> None:
    demo()
    model.proposal = USELESS
    outcome, recording = evolve(model, {"max_metric_calls": 40})
    assert outcome.state == "rejected" and outcome.message == "the recipe proposed no change"
    assert releases() == [1]
    gepa = outcome.evidence["gepa"]
    assert gepa["seed_val_score"] == gepa["best_val_score"] == 0.0
    assert gepa["reflection_calls"] >= 1 and "nothing to propose" in gepa["result"]
    assert gepa["metric_calls"] == len(recording.splits) <= 40
    assert "test" not in recording.splits  # no candidate: the gate never ran
    assert outcome.evidence["budget"]["calls"] == len(model.requests())


def test_metric_calls_never_pass_the_limit_where_gepa_alone_would(model: Sums) -> None:
    """13 calls: the seed's val (3), one step (3 + 3, rejected), then 4 left — gepa's own
    stopper would start another step and spend 15."""
    demo()
    model.proposal = USELESS
    outcome, recording = evolve(model, {"max_metric_calls": 13})
    assert outcome.state == "rejected"
    assert outcome.evidence["gepa"]["metric_calls"] == len(recording.splits) == 9
    assert outcome.evidence["gepa"]["stopped"] == "metric calls spent"


def test_a_batch_past_the_limit_is_refused_before_any_of_it_runs() -> None:
    ran: list[str] = []

    def run_task(files: dict[str, str], task: Task) -> TaskRun:
        ran.append(task.id)
        return TaskRun(1.0, "1", "ok")

    meter = Meter(max_calls=4, step_cost=3)
    layout = Layout.of(starter_tree().files())
    adapter = ReefAdapter(layout, run_task, meter, lambda _used: None)
    batch = sums().split("train")[:3]
    adapter.evaluate(batch, layout.seed)
    with pytest.raises(_Refused):
        adapter.evaluate(batch, layout.seed)
    assert len(ran) == meter.used == 3 and meter.refused == 1 and meter(None) is True


def test_a_batch_goes_out_as_many_at_once_as_the_model_decodes_and_keeps_its_order() -> None:
    """Issue 25: with the model's slots (``Context.parallelism``) a batch's runs not in
    the cache go out together; the answers come back in the batch's order, each metered
    once, and a task repeated in the batch (greedy) runs once."""
    lock = threading.Lock()
    in_flight, most, ran = [0], [0], []
    both_in = threading.Barrier(2, timeout=30)  # two runs in flight at once, or it fails

    def run_task(files: dict[str, str], task: Task) -> TaskRun:
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
            ran.append(task.id)
        if len(ran) <= 2:
            both_in.wait()
        with lock:
            in_flight[0] -= 1
        return TaskRun(1.0, f"answer of {task.id}", "ok")

    meter = Meter(max_calls=20, step_cost=3)
    layout = Layout.of(starter_tree().files())
    used: list[int] = []
    adapter = ReefAdapter(layout, run_task, meter, used.append, greedy=True, workers=4)
    tasks = sums().split("train")[:3]
    batch = [tasks[0], tasks[1], tasks[2], tasks[0]]
    result = adapter.evaluate(batch, layout.seed)
    assert most[0] >= 2
    assert result.outputs == [f"answer of {t.id}" for t in batch]
    assert sorted(ran) == sorted(t.id for t in tasks) and meter.used == 3 == result.num_metric_calls
    assert sorted(used) == [1, 2, 3]
    again = adapter.evaluate(batch, layout.seed)  # all from the cache now
    assert again.outputs == result.outputs and again.num_metric_calls == 0 and meter.used == 3


def test_a_format_gain_that_loses_the_substance_is_vetoed(model: Sums) -> None:
    """The marker makes the model answer a bare but WRONG number: the scorer (a bare
    number) goes up, the lenient measure (the right number) goes down."""
    demo()
    model.wrong = True
    outcome, _ = evolve(model, {"max_metric_calls": 30}, tasks=sums(scorer="regex"))
    assert outcome.state == "rejected", outcome.message
    assert "lenient measure regressed: 1.000 -> 0.000" in outcome.message
    assert "scorer went 0.000 -> 1.000" in outcome.message
    checks = {c["name"]: c for c in outcome.verdict["checks"]}
    assert checks["evaluation"]["status"] == "failed"
    assert "candidate_mean=1.0" in checks["evaluation"]["findings"]
    assert "lenient_candidate_mean=0.0" in checks["evaluation"]["findings"]
    assert releases() == [1]


def test_an_outage_is_invalid_never_a_zero(model: Sums) -> None:
    demo()
    model.outage = True
    outcome, recording = evolve(model, {"max_metric_calls": 30})
    assert outcome.state == "invalid", outcome.message
    assert "had no score" in outcome.message
    gepa = outcome.evidence["gepa"]
    assert gepa["outages"] == gepa["metric_calls"] == 3  # the seed's val, then it stopped
    assert gepa["reflection_calls"] == 0 and recording.splits == ["val"] * 3
    assert releases() == [1]


def test_a_spent_model_budget_stops_the_search(model: Sums) -> None:
    demo()
    llm = model.client(Budget(max_calls=8))
    outcome = engine.run(
        scenarios.get("demo"),
        engine.recipe_named("gepa", {"max_metric_calls": 30}),
        model=llm,
        task_runner=DirectRunner(llm),
        tasks=sums(),
    )
    assert outcome.state == "stopped" and "model-call budget" in outcome.message
    assert outcome.evidence["budget"]["calls"] == len(model.requests()) == 8
    assert "BudgetExceeded" in outcome.evidence["gepa"]["stopped"]
    assert releases() == [1]


def test_a_val_split_the_limit_cannot_score_is_refused_up_front(model: Sums) -> None:
    demo()
    outcome, recording = evolve(model, {"max_metric_calls": 5})
    assert outcome.state == "rejected"
    assert "gepa needs at least 12 metric calls" in outcome.message
    assert "--max-metric-calls" in outcome.message
    assert recording.splits == [] and model.requests() == []


def test_options_are_checked_and_unknown_ones_named() -> None:
    gepa = Gepa.with_options({"max_metric_calls": 20, "seed": 3, "use_merge": True})
    assert (gepa.options.max_metric_calls, gepa.options.seed, gepa.options.use_merge) == (
        20,
        3,
        True,
    )
    limits = gepa.limits(None)
    assert limits is not None and limits.calls is not None
    assert limits.calls >= 20 + 20 // 3 + 1
    sized = TaskSet(repeats=2, tasks=[Task(id=f"t{i}", prompt="p", exact="1") for i in range(300)])
    bigger = gepa.limits(sized)
    assert bigger is not None and bigger.calls is not None
    assert bigger.calls >= limits.calls - 2 * 400 + 2 * 300 * 2 * 2  # the gate's test runs
    assert gepa.revise(None, None, ["x"]) == []  # type: ignore[arg-type]
    with pytest.raises(ReefError, match="known options: max_metric_calls, seed"):
        Gepa.with_options({"max_calls": 3})
    with pytest.raises(BudgetInvalid, match="max_metric_calls must be a whole number"):
        Gepa.with_options({"max_metric_calls": 0})
    with pytest.raises(ReefError, match="use_merge must be true or false"):
        Gepa.with_options({"use_merge": "yes"})


def test_the_reflection_prompt_is_short_and_the_reply_is_read_leniently() -> None:
    records = [
        {"Inputs": "What is 1 + 2?", "Generated Outputs": "3", "Feedback": "ok", "score": 1.0},
        {"Inputs": "What is 2 + 2?", "Generated Outputs": "It is 4", "Feedback": "no", "score": 0},
    ]
    prompt = prompt_for("rules/a.md", "Be brief.", records)
    assert prompt.endswith(ASK_LINE) and "Be brief." in prompt and len(prompt) < 1200
    assert prompt.index("What is 2 + 2?") < prompt.index("What is 1 + 2?")  # failures first
    assert extract("Sure:\n```markdown\nAnswer tersely.\n```\nDone.", "Be brief.") == (
        "Answer tersely."
    )
    assert extract("```\nAnswer tersely.", "Be brief.") == "Answer tersely."  # cut off
    assert extract("Answer tersely.", "Be brief.") == "Answer tersely."  # no fence
    assert extract("```\nBe brief.\n```", "Be brief.") is None  # the old text again
    assert extract("   ", "Be brief.") is None
    assert extract(f"Current instruction (rules/a.md): x\n{ASK_LINE}", "Be brief.") is None
    assert len(extract("word " * 5000, "Be brief.") or "") <= 4000


def test_a_skill_keeps_its_frontmatter_and_other_files_are_copied() -> None:
    tree = starter_tree().files()
    layout = Layout.of(tree)
    skill = "skills/write-tests/SKILL.md"
    out = layout.tree({**layout.seed, skill: "Write one test per behaviour."})
    assert out[skill].startswith(tree[skill].split("\n---\n")[0] + "\n---\n")
    assert out[skill].endswith("\nWrite one test per behaviour.\n")
    assert {p: t for p, t in out.items() if p != skill} == {
        p: t for p, t in tree.items() if p != skill
    }
    assert layout.tree(layout.seed) == tree
    assert Layout.of({"reef.toml": "format = 1\n"}).seed == {SEED_PATH: SEED_BODY}


# ------------------------------------------------------------------ CLI and server


def test_reef_evolve_runs_gepa_from_the_command_line(
    model: Sums, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    demo("cli")
    path = tmp_path / "tasks.yaml"
    path.write_text(json.dumps(sums().model_dump(exclude_none=True)), encoding="utf-8")
    monkeypatch.setenv("REEF_MODEL", "openai/scripted")
    monkeypatch.setenv("REEF_API_BASE", model.api_base)
    args = ["evolve", "--recipe", "gepa", "-s", "cli", "--tasks", str(path)]
    result = runner.invoke(app_(), [*args, "--max-metric-calls", "20", "--json"])
    assert result.exit_code == 0, result.output
    outcome = json.loads(result.output)
    assert outcome["state"] == "published" and outcome["release"] == 2
    assert outcome["evidence"]["gepa"]["max_metric_calls"] == 20
    assert outcome["evidence"]["gepa"]["metric_calls"] <= 20
    help_text = reef("evolve", "--help")
    assert "gepa" in help_text and "--max-metric-calls" in help_text and "--seed" in help_text


def app_() -> Any:
    from reef_cli.cli.main import app

    return app


def test_a_gepa_job_on_a_scenario_without_tasks_is_rejected_with_the_reason() -> None:
    from recipes.engine.worker import Worker
    from reef_cli.core.tokens import TokenSet
    from reef_cli.server.app import create_app
    from reef_cli.server.serve_config import ServeConfig

    token = "reef_test_token_0123456789"
    demo("team")
    app = create_app(
        ServeConfig(upstream="http://127.0.0.1:9/v1", default_scenario="team"),
        tokens=TokenSet(token, []),
        jobs=Worker(),
    )
    auth = {"authorization": f"Bearer {token}"}
    with ServerThread(app) as server:
        response = httpx.post(
            f"{server.url}/reef/evolve",
            json={"recipe": "gepa", "options": {"max_metric_calls": 40, "seed": 2}},
            headers=auth,
        )
        assert response.status_code == 202, response.text
        job = response.json()
        assert job["recipe"] == "gepa" and job["options"] == {"max_metric_calls": 40, "seed": 2}
        deadline = time.monotonic() + 30
        while job["state"] in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(0.05)
            job = httpx.get(f"{server.url}/reef/jobs/{job['id']}", headers=auth).json()
        bad = httpx.post(
            f"{server.url}/reef/evolve",
            json={"recipe": "gepa", "options": {"max_metric_calls": 0}},
            headers=auth,
        )
    assert job["state"] == "rejected", job
    assert job["message"].startswith("gepa searches against scored tasks and has none")
    assert "reef tasks make" in job["message"] and "\n" not in job["message"]
    assert bad.status_code in (400, 422)
    assert releases("team") == [1]

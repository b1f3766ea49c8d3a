"""`reef scenario status S`: the live loop's last check and run (``learning.json``) and a
fresh eligibility count made by the command itself, with no server running."""

from __future__ import annotations

import json
from pathlib import Path

from reef_cli.core import jobs, scenarios
from reef_cli.core.publishing import publish_files
from reef_cli.core.reports import ReportIn, save_report
from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.server.learning import LiveLoop
from reef_cli.server.serve_config import LearningConfig
from tests.cli.helpers import reef, reef_fails, reef_json
from tests.fakes.jobs import KeptJobs
from tests.fakes.records import chat_answer, chat_record


def seed(scenario: str, session: str, score: float | None, release: int = 1) -> str:
    store = SQLiteStore()
    record = chat_record(
        scenario,
        {"messages": [{"role": "user", "content": f"{session}: fix the bug"}]},
        chat_answer("Fixed."),
        session_id=session,
        release_id=release,
    )
    store.insert_many([record])
    if score is not None:
        save_report(store, ReportIn(score=score, references=[record.id]), None)
    store.close()
    return record.id


def demo() -> None:
    scenarios.create("demo")
    publish_files("demo", {"rules/a.md": "Be brief.\n"}, reason="start")


def test_no_live_loop_yet_counts_here_and_says_so() -> None:
    demo()
    seed("demo", "s1", 1.0)
    seed("demo", "s2", None)
    out = reef("scenario", "status", "demo")
    assert "1 eligible, 0 stale, 1 unscored session(s) now" in out
    assert "No live loop has run for demo" in out and "reef serve --recipe" in out
    data = reef_json("scenario", "status", "demo")
    assert data["has_run"] is False and data["last_run"] is None
    assert data["now"] == {
        "recipe": "skillclaw",
        "max_staleness": 2,
        "served": 1,
        "eligible": 1,
        "stale": 0,
        "unscored": 1,
    }


def test_after_a_check_it_shows_the_run_the_counts_and_the_next_trigger(
    reef_home: Path,
) -> None:
    demo()
    for name in ("s1", "s2"):
        seed("demo", name, 1.0)
    config = LearningConfig(recipe="skillclaw", batch_size=2, min_interval_s=3600)
    runner = KeptJobs()
    loop = LiveLoop(config, SQLiteStore(), runner)
    state = loop.check("demo")  # one poll, run here: no thread, no clock
    [job] = runner.jobs
    assert state.last_run is not None and state.last_run.job == job.id
    job.state, job.release, job.message = "published", 2, "improved skill write-tests"
    jobs.save(job)
    publish_files("demo", {"rules/a.md": "Be brief. Run the tests.\n"}, reason="learned")
    seed("demo", "s3", 0.5, release=2)
    loop.check("demo")  # settles the run
    raw = json.loads((reef_home / "scenarios/demo/learning.json").read_text())
    assert raw["last_run"]["state"] == "published"

    out = reef("scenario", "status", "demo")
    assert "No live loop" not in out
    # the skillclaw stand-in did not advance its mark: all three are still new here
    assert "3 eligible, 0 stale, 0 unscored session(s) now" in out and "served r2" in out
    assert "live loop: skillclaw, batch 2, max staleness 2, min interval 3600s, publish auto" in out
    assert f"last run: {job.id} (skillclaw, 2 session(s))" in out
    assert "published r2: improved skill write-tests" in out
    assert "next run: waits for interval: min_interval_s: not before" in out

    data = reef_json("scenario", "status", "demo")
    assert data["has_run"] is True and data["runs"] == 1
    assert data["last_run"]["release"] == 2 and data["last_run"]["state"] == "published"
    assert data["config"]["batch_size"] == 2 and data["recipe"] == "skillclaw"
    assert data["next_trigger"]["waits_for"] == "interval"
    assert data["now"]["eligible"] == 3 and data["now"]["served"] == 2
    assert "batch" not in data["last_run"]  # session keys stay in the file, not the view


def test_max_staleness_from_the_last_check_applies_to_the_fresh_count() -> None:
    demo()
    for n in (2, 3, 4):
        publish_files("demo", {"rules/a.md": f"v{n}\n"}, reason=f"v{n}")
    seed("demo", "old", 1.0, release=1)  # 4 - 1 = 3 > 1
    seed("demo", "new", 1.0, release=4)
    loop = LiveLoop(
        LearningConfig(recipe="gepa", max_staleness=1, batch_size=5), SQLiteStore(), KeptJobs()
    )
    loop.check("demo")
    data = reef_json("scenario", "status", "demo")
    assert (data["now"]["eligible"], data["now"]["stale"]) == (1, 1)
    assert data["now"]["recipe"] == "gepa" and data["now"]["max_staleness"] == 1
    assert (data["counts"]["eligible"], data["counts"]["stale"]) == (1, 1)
    # another mark can be counted on purpose
    other = reef_json("scenario", "status", "demo", "--recipe", "skillclaw")
    assert other["now"]["recipe"] == "skillclaw"


def test_an_unknown_scenario_is_one_line_and_writes_nothing(reef_home: Path) -> None:
    line = reef_fails("scenario", "status", "nowhere")
    assert "unknown scenario 'nowhere'" in line
    assert not (reef_home / "scenarios" / "nowhere").exists()
    line = reef_fails("scenario", "status", "Bad_Name")
    assert "not kebab-case" in line

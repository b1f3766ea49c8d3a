"""The live loop (`reef serve` with `reef:` / --recipe): sessions go through the real proxy
on a real uvicorn server, are scored with `POST /reef/report`, and once a scenario has
``batch_size`` eligible sessions the loop submits a job to the server's JobRunner; what
the job publishes is served to the next request with no restart.

Stand-in runners (they record what they were handed, and end jobs the way a recipe
would, through core's publishing) show the loop's rules; one test runs the real
``recipes.engine.worker.Worker`` with the real GEPA recipe against a scripted model. Nothing here
waits on time: tests poll with a generous deadline, or count the loop's polls.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from reef_cli.core import jobs, scenarios
from reef_cli.core.errors import ServeError
from reef_cli.core.publishing import publish_files
from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.core.tokens import ScopedToken, TokenSet, digest
from reef_cli.server import learning
from reef_cli.server.app import create_app
from reef_cli.server.learning import LiveLoop
from reef_cli.server.receipts import RECORD_HEADER, RELEASE_HEADER
from reef_cli.server.serve_config import LearningConfig, ServeConfig, build, load_file, with_recipe
from tests.fakes.server_thread import ServerThread
from tests.fakes.upstream import FakeUpstream
from tests.server.conftest import LIMITED, TOKEN

AUTH = {"authorization": f"Bearer {TOKEN}"}
RULE = {"rules/style.md": "Prefer small, tested changes.\n"}


# ------------------------------------------------------------------ stand-in runners


class Recording:
    """A JobRunner that keeps what it was handed and ends each job with ``end`` (a
    function of the job: the state to end it in, or None when it ended the job itself or
    leaves it queued)."""

    def __init__(self, end: Callable[[jobs.Job], str | None] | None = None) -> None:
        self.end = end
        self.jobs: list[jobs.Job] = []
        self.calls: list[str] = []

    def start(self) -> None:
        self.calls.append("start")

    def stop(self) -> None:
        self.calls.append("stop")

    def submit(self, job: jobs.Job) -> None:
        self.jobs.append(job)
        if self.end is not None:
            state = self.end(job)
            if state is not None:
                finish(job, state)


def finish(job: jobs.Job, state: str, release: int | None = None) -> None:
    job.state, job.release, job.message = state, release, f"stand-in: {state}"
    jobs.save(job)


def publishes(job: jobs.Job) -> None:
    """What a recipe that found a change does: publish it (core's path), end published
    (or pending, when the job holds it for review)."""
    n = len(scenarios.get(job.scenario).chain().releases())
    release, _ = publish_files(
        job.scenario,
        {"rules/style.md": f"Prefer small, tested changes (learned {n}).\n"},
        reason="learned from the batch",
        source=f"recipe:{job.recipe}",
        recipe=job.recipe,
        hold="review" if job.publish == "review" else None,
    )
    finish(job, "pending" if release.meta.status == "pending" else "published", release.number)


# ------------------------------------------------------------------ the stack


@dataclass
class Live:
    fake: FakeUpstream
    upstream: ServerThread
    reef: ServerThread
    app: Any
    home: Path

    @property
    def url(self) -> str:
        return self.reef.url

    @property
    def loop(self) -> LiveLoop:
        loop: LiveLoop = self.app.state.learning
        return loop

    def chat(
        self, scenario: str, session: str | None, text: str, release: str | None = None
    ) -> httpx.Response:
        headers = {**AUTH, "x-reef-scenario": scenario}
        if session is not None:
            headers["x-reef-session"] = session
        if release is not None:
            headers[RELEASE_HEADER] = release
        body = {"model": "m", "messages": [{"role": "user", "content": text}]}
        response = httpx.post(
            self.url + "/v1/chat/completions", json=body, headers=headers, timeout=30
        )
        assert response.status_code == 200, response.text
        return response

    def score(self, receipt: str, value: float = 1.0, feedback: str | None = None) -> None:
        body: dict[str, Any] = {"references": [receipt], "score": value}
        if feedback is not None:
            body["feedback"] = feedback
        response = httpx.post(
            self.url + "/reef/report",
            json=body,
            headers=AUTH,
            timeout=30,
        )
        assert response.status_code == 201, response.text

    def session(
        self,
        scenario: str,
        name: str,
        score: float | None = 1.0,
        release: str | None = None,
        feedback: str | None = None,
    ) -> str:
        """Two turns under one session id, the last one scored; returns its receipt."""
        self.chat(scenario, name, f"{name}: please fix the failing test", release)
        receipt = self.chat(scenario, name, f"{name}: thanks, now add a docstring", release)
        if score is not None:
            self.score(receipt.headers[RECORD_HEADER], score, feedback)
        return receipt.headers[RECORD_HEADER]

    def learning(self, scenario: str, token: str | None = TOKEN) -> httpx.Response:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.get(f"{self.url}/reef/scenarios/{scenario}/learning", headers=headers)

    def state(self, scenario: str) -> dict[str, Any]:
        response = self.learning(scenario)
        assert response.status_code == 200, response.text
        data: dict[str, Any] = response.json()
        return data

    def polls(self, n: int = 5) -> None:
        """Let the loop poll ``n`` more times (counted, not timed)."""
        target = self.loop.checks + n
        wait_for(lambda: self.loop.checks >= target, f"{n} more polls")


def counted(stack: Live, scenario: str = "shop", **expected: int) -> bool:
    counts = stack.state(scenario)["counts"]
    return all(counts.get(key) == value for key, value in expected.items())


def wait_for(predicate: Callable[[], Any], what: str, deadline_s: float = 90) -> Any:
    """Poll ``predicate``; a state file that has no such part yet (``next_trigger`` is
    null before the first count) is "not yet", not a failure."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except (KeyError, TypeError):
            value = None
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def live(home: Path) -> Iterator[Callable[..., Live]]:
    started: list[ServerThread] = []

    def make(runner: Any, **loop: Any) -> Live:
        fake = FakeUpstream()
        up = ServerThread(fake.app).start()
        started.append(up)
        settings = {"recipe": "gepa", "batch_size": 3, "poll_s": 0.05, **loop}
        config = ServeConfig(
            upstream=up.url + "/v1",
            upstream_dialect="openai",
            reef=LearningConfig(**settings),
        )
        scoped = [ScopedToken("limited", digest(LIMITED).hex(), ("team-a",))]
        app = create_app(config, tokens=TokenSet(TOKEN, scoped), jobs=runner)
        reef = ServerThread(app).start()
        started.append(reef)
        return Live(fake, up, reef, app, home)

    yield make
    for server in reversed(started):
        server.stop()


def first_release(name: str, tasks: bool = True) -> None:
    """Scenario ``name`` with r1; ``tasks``: a task set file (gepa waits for one; the
    stand-in runners never read it)."""
    scenarios.create(name)
    publish_files(name, RULE, reason="start")
    if tasks:
        (scenarios.get(name).path / "tasks.yaml").write_text("name: stand-in\ntasks: []\n")


# ------------------------------------------------------------------ the loop


def test_a_full_batch_starts_one_job_and_its_release_is_served_with_no_restart(live) -> None:
    first_release("shop")
    runner = Recording(end=publishes)
    stack = live(runner, min_interval_s=3600)
    assert stack.chat("shop", None, "hello").headers[RELEASE_HEADER] == "1"
    stack.session("shop", "s1")
    stack.session("shop", "s2")
    stack.session("shop", "s3", score=None)  # recorded, not scored yet
    # unscored: s3 and the "hello" (a record with no session id is a session of its own)
    wait_for(lambda: counted(stack, eligible=2, unscored=2), "the count")
    state = stack.state("shop")
    assert state["counts"]["eligible"] == 2 and runner.jobs == []
    assert state["next_trigger"]["waits_for"] == "sessions"
    assert state["next_trigger"]["needed"] == 1

    receipt = stack.session("shop", "s3b", score=None)
    stack.score(receipt)  # the third scored session completes the batch
    [job] = wait_for(lambda: runner.jobs, "a job")
    assert (job.scenario, job.recipe, job.ask, job.publish) == ("shop", "gepa", None, "auto")
    assert jobs.get(job.id).origin == "live-loop"
    wait_for(lambda: stack.state("shop")["last_run"]["state"] == "published", "the run's end")

    # the next response is served from r2, with no restart
    assert stack.chat("shop", None, "and now?").headers[RELEASE_HEADER] == "2"
    state = stack.state("shop")
    run = state["last_run"]
    assert (run["job"], run["release"], run["sessions"], run["recipe"]) == (job.id, 2, 3, "gepa")
    assert run["ended"] and run["message"] == "stand-in: published"
    assert state["runs"] == 1 and state["enabled"] is True

    # the batch is consumed: gepa reads no sessions, so the loop advanced its mark
    mark = json.loads((stack.home / "scenarios/shop/gepa.json").read_text())
    assert {"session:s1", "session:s2", "session:s3b"} <= set(mark["sessions"])
    wait_for(lambda: stack.state("shop")["counts"].get("eligible") == 0, "the recount")

    # min_interval_s: a second full batch waits for the interval, no second job
    for name in ("t1", "t2", "t3"):
        stack.session("shop", name)
    wait_for(lambda: stack.state("shop")["next_trigger"]["waits_for"] == "interval", "the interval")
    stack.polls(5)
    state = stack.state("shop")
    assert len(runner.jobs) == 1 and state["counts"]["eligible"] == 3
    assert state["next_trigger"]["at"] > run["started"]
    # the learning state file is private
    assert (stack.home / "scenarios/shop/learning.json").stat().st_mode & 0o777 == 0o600


def test_one_job_per_scenario_at_a_time_including_jobs_from_the_api(live) -> None:
    first_release("shop")
    runner = Recording(end=None)  # jobs stay queued until the test ends them
    stack = live(runner, min_interval_s=0)
    for name in ("a1", "a2", "a3"):
        stack.session("shop", name)
    [first] = wait_for(lambda: runner.jobs, "the first job")
    for name in ("b1", "b2", "b3"):
        stack.session("shop", name)
    wait_for(lambda: stack.state("shop")["counts"].get("eligible") == 6, "the recount")
    stack.polls(5)
    assert len(runner.jobs) == 1
    assert stack.state("shop")["next_trigger"] == {
        "waits_for": "job",
        "detail": f"job {first.id} is queued",
        "at": None,
        "job": first.id,
    }

    # an ask queued through the API for the same scenario also holds the loop back
    asked = jobs.create("shop", "reefine", "always run the tests first")
    finish(first, "rejected")
    wait_for(lambda: stack.state("shop")["last_run"]["state"] == "rejected", "the end")
    wait_for(lambda: stack.state("shop")["next_trigger"].get("job") == asked.id, "the ask")
    stack.polls(5)
    assert len(runner.jobs) == 1

    # once it ends, the next batch (the b-sessions, still new) starts the second job
    finish(asked, "published")
    second = wait_for(lambda: runner.jobs[1:], "the second job")[0]
    assert stack.state("shop")["last_run"]["job"] == second.id
    assert stack.state("shop")["last_run"]["sessions"] == 3  # the a-batch was consumed


def test_a_replica_holding_the_scenarios_lock_holds_the_loop_back(live) -> None:
    """Another `reef serve` on the same store deciding for the scenario (it holds the
    scenario's lock) stops this one from starting a run; once it lets go, one run starts."""
    first_release("shop")
    runner = Recording(end=None)
    stack = live(runner, min_interval_s=0)
    other = SQLiteStore()  # another process's handle on the same store
    with other.exclusive("live-loop:shop") as held:
        assert held
        for name in ("a1", "a2", "a3"):
            stack.session("shop", name)
        wait_for(lambda: stack.state("shop")["next_trigger"]["waits_for"] == "replica", "the lock")
        stack.polls(5)
        assert runner.jobs == []
    wait_for(lambda: runner.jobs, "the job once the lock is free")
    stack.polls(5)
    assert len(runner.jobs) == 1


def test_with_nothing_to_change_the_served_release_stays(live) -> None:
    first_release("shop")
    runner = Recording(end=lambda job: "unchanged")
    stack = live(runner, min_interval_s=0)
    for name in ("s1", "s2", "s3"):
        stack.session("shop", name)
    wait_for(lambda: runner.jobs, "a job")
    wait_for(lambda: stack.state("shop")["last_run"]["state"] == "unchanged", "the end")
    assert stack.chat("shop", None, "still r1?").headers[RELEASE_HEADER] == "1"
    assert [r.number for r in scenarios.get("shop").chain().releases()] == [1]
    # the batch was looked at: it does not start the same run again
    wait_for(lambda: stack.state("shop")["counts"].get("eligible") == 0, "the recount")
    stack.polls(5)
    assert len(runner.jobs) == 1


def test_sessions_older_than_max_staleness_are_excluded_and_counted(live) -> None:
    first_release("shop")
    chain = scenarios.get("shop").chain()
    publish_files("shop", {"rules/style.md": "two\n"}, reason="two")
    publish_files("shop", {"rules/style.md": "three\n"}, reason="three")
    runner = Recording(end=None)
    stack = live(runner, max_staleness=1, batch_size=3)
    stack.session("shop", "old1", release="1")  # 3 - 1 = 2 > 1: stale
    stack.session("shop", "old2", release="1")
    stack.session("shop", "near", release="2")  # 3 - 2 = 1: fresh enough
    stack.session("shop", "now")  # credited to the served r3
    stack.session("shop", "quiet", score=None)
    # (a session is unscored between its answer and its report, and a recount can land
    # between a session's turns: wait for the whole count; a clean-clone CI once read
    # eligible 1 after scored 4 and unscored 1 had settled)
    expected = {"scored_sessions": 4, "unscored": 1, "eligible": 2, "stale": 2}
    wait_for(lambda: counted(stack, **expected), f"the count {expected}")
    counts = stack.state("shop")["counts"]
    assert (counts["eligible"], counts["stale"], counts["unscored"]) == (2, 2, 1)
    assert counts["served"] == 3 and counts["scored_sessions"] == 4
    assert counts["counted_sessions"] == 4  # the full count's own view, for whoever waits on it
    stack.polls(5)
    assert runner.jobs == []
    assert chain.served().number == 3


def test_a_job_that_fails_or_a_scenario_that_breaks_never_stops_the_loop(
    live, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(learning, "RETRY_S", 0.5)  # the same batch is retried this soon
    first_release("shop")
    first_release("cafe")
    secret = "my password is hunter2"

    class Flaky(Recording):
        def submit(self, job: jobs.Job) -> None:
            super().submit(job)
            if len(self.jobs) == 1:
                raise RuntimeError(secret)

    runner = Flaky(end=None)
    caplog.set_level(logging.INFO, logger="reef.learning")
    stack = live(runner, min_interval_s=0)
    # a scenario whose chain ref is broken fails its own check, every poll
    stack.chat("cafe", None, "hello")
    (stack.home / "scenarios/cafe/chain.git/refs/reef/chain").write_text("0" * 39 + "1\n")
    for name in ("s1", "s2", "s3"):
        stack.session("shop", name)
    [first, second] = wait_for(lambda: runner.jobs[1:] and runner.jobs, "a second job")
    assert jobs.get(first.id).state == "failed"
    assert jobs.get(first.id).message == "the job runner refused the job (RuntimeError)"
    assert stack.state("shop")["last_run"]["job"] == second.id  # the same batch, retried
    wait_for(lambda: stack.state("cafe")["last_error"], "the broken scenario's error")
    assert stack.state("cafe")["last_error"] == "ChainCorrupt"
    text = caplog.text
    assert "RuntimeError" in text and "ChainCorrupt" in text and secret not in text

    # a job that ends failed (what the Worker does when a recipe raises) is retried later
    finish(second, "failed")
    third = wait_for(lambda: runner.jobs[2:], "a third job")[0]
    assert stack.state("shop")["last_run"]["job"] == third.id
    assert stack.loop._thread is not None and stack.loop._thread.is_alive()


def test_the_learning_route_shape_and_auth(live) -> None:
    first_release("shop")
    first_release("team-a")
    runner = Recording(end=publishes)
    stack = live(runner, scenarios=["shop", "team-a"], publish="review", batch_size=2)
    assert stack.learning("shop", token=None).status_code == 401
    assert stack.learning("shop", token="reef_wrong_token_000000").status_code == 401
    forbidden = stack.learning("shop", token=LIMITED)
    assert forbidden.status_code == 403 and "not allowed" in forbidden.json()["error"]["message"]
    assert stack.learning("nowhere").status_code == 404
    assert stack.learning("Not_Kebab").status_code == 400
    assert stack.learning("team-a", token=LIMITED).status_code == 200

    stack.session("shop", "s1")
    stack.session("shop", "s2")
    wait_for(lambda: runner.jobs, "a job")
    wait_for(lambda: stack.state("shop")["last_run"]["state"] == "pending", "the end")
    state = stack.state("shop")
    assert set(state) == {
        "scenario",
        "enabled",
        "has_run",
        "config",
        "recipe",
        "checked_at",
        "counts",
        "last_run",
        "next_trigger",
        "runs",
        "last_error",
    }
    assert state["config"] == {
        "recipe": "gepa",
        "batch_size": 2,
        "max_staleness": 2,
        "min_interval_s": 600.0,
        "publish": "review",
        "scenarios": ["shop", "team-a"],
        "poll_s": 0.05,
        "adapter": None,
        "options": {},
    }
    assert set(state["last_run"]) == {
        "job",
        "recipe",
        "started",
        "state",
        "ended",
        "message",
        "release",
        "sessions",
    }
    assert set(state["counts"]) >= {"eligible", "stale", "unscored", "scored_sessions", "served"}
    assert state["next_trigger"]["waits_for"] in ("interval", "sessions")
    # publish: review: the candidate waits as a proposal; the served release stays r1
    assert runner.jobs[0].publish == "review"
    assert state["last_run"]["release"] == 2
    assert stack.chat("shop", None, "which?").headers[RELEASE_HEADER] == "1"
    # a scenario the loop does not cover: shown, not enabled
    first_release("other")
    other = stack.state("other")
    assert (other["enabled"], other["has_run"], other["last_run"]) == (False, False, None)


def test_the_loop_starts_and_stops_with_the_app_and_needs_a_runner(home: Path) -> None:
    config = ServeConfig(upstream="http://127.0.0.1:9/v1", reef=LearningConfig(recipe="gepa"))
    with pytest.raises(ServeError, match="needs a job runner"):
        create_app(config, tokens=None)
    runner = Recording()
    app = create_app(config, tokens=None, jobs=runner)
    with ServerThread(app):
        loop = app.state.learning
        assert loop._thread.is_alive() and runner.calls == ["start"]
        thread = loop._thread
    assert not thread.is_alive() and runner.calls == ["start", "stop"]
    # without `reef:` there is no loop and the route says so
    plain = create_app(ServeConfig(upstream="http://127.0.0.1:9/v1"), tokens=None)
    assert plain.state.learning is None


def test_the_loop_leaves_a_session_reading_recipes_mark_to_the_recipe(live) -> None:
    """SkillClaw advances its own mark over what it consumed (and holds back sessions
    still waiting on a judge): the loop never writes it, whatever the job's end."""
    first_release("shop", tasks=False)
    runner = Recording(end=lambda job: "rejected")
    stack = live(runner, recipe="skillclaw", min_interval_s=3600)
    for name in ("s1", "s2", "s3"):
        stack.session("shop", name)
    [job] = wait_for(lambda: runner.jobs, "a job")
    assert job.recipe == "skillclaw"
    wait_for(lambda: stack.state("shop")["last_run"]["state"] == "rejected", "the end")
    stack.polls(3)
    assert not (stack.home / "scenarios/shop/skillclaw.json").exists()
    state = stack.state("shop")
    assert state["counts"]["eligible"] == 3 and state["next_trigger"]["waits_for"] == "interval"


@pytest.mark.parametrize("end", ["invalid", "failed", "stopped"])
def test_a_run_that_ended_badly_is_retried_after_a_wait_or_on_a_new_session(live, end: str) -> None:
    """With the answers a run was judged on reused, an end that repeats (a judge that
    cannot score a replayed answer) repeats in a second: the loop waits RETRY_S before it
    tries the same batch again (with min_interval_s 0 it spun, a job a second), and a new
    session starts the next run at once."""
    first_release("shop")
    runner = Recording(end=lambda job: end)
    stack = live(runner, min_interval_s=0)
    for name in ("s1", "s2", "s3"):
        stack.session("shop", name)
    wait_for(lambda: stack.state("shop")["last_run"]["state"] == end, "the end")
    stack.polls(5)
    state = stack.state("shop")
    assert len(runner.jobs) == 1
    assert state["next_trigger"]["waits_for"] == "retry"
    assert state["next_trigger"]["at"] and "tried again" in state["next_trigger"]["detail"]
    stack.session("shop", "s4")
    wait_for(lambda: len(runner.jobs) == 2, "the next run, on the new session")
    assert stack.state("shop")["last_run"]["sessions"] == 4


def test_a_held_back_batch_waits_for_a_new_session_before_the_next_run(live) -> None:
    """A SkillClaw run that ends unchanged keeps its batch (its mark does not move): the
    loop does not start it again on the very same sessions — with min_interval_s 0 it
    would spin — but the next new session starts a run with all of them."""
    first_release("shop", tasks=False)
    runner = Recording(end=lambda job: "unchanged")
    stack = live(runner, recipe="skillclaw", min_interval_s=0)
    for name in ("s1", "s2", "s3"):
        stack.session("shop", name)
    wait_for(lambda: stack.state("shop")["last_run"]["state"] == "unchanged", "the end")
    stack.polls(5)
    state = stack.state("shop")
    assert len(runner.jobs) == 1 and state["counts"]["eligible"] == 3
    assert state["next_trigger"]["waits_for"] == "sessions"
    assert "held its batch back" in state["next_trigger"]["detail"]
    stack.session("shop", "s4")
    wait_for(lambda: len(runner.jobs) == 2, "the next run, on the new session")
    assert stack.state("shop")["last_run"]["sessions"] == 4


def test_gepa_waits_for_the_scenario_task_set(live) -> None:
    first_release("shop", tasks=False)
    runner = Recording(end=None)
    stack = live(runner, recipe="gepa", batch_size=1)
    stack.session("shop", "s1")
    wait_for(lambda: stack.state("shop")["next_trigger"]["waits_for"] == "tasks", "tasks")
    assert "tasks.yaml" in stack.state("shop")["next_trigger"]["detail"]
    stack.polls(3)
    assert runner.jobs == []
    (stack.home / "scenarios/shop/tasks.yaml").write_text("tasks: []\n")
    [job] = wait_for(lambda: runner.jobs, "a job once the task set exists")
    assert job.recipe == "gepa"


# ------------------------------------------------------------------ the real worker


def test_the_real_worker_runs_skillclaw_publishes_then_keeps_the_served_release(
    live, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``recipes.engine.worker.Worker`` + the SkillClaw recipe, its model scripted by each call's
    system prompt (tests/recipes/skillclaw). First batch: the decision creates a skill
    that wins the batch's replay tasks: r2, served to the next request with no restart.
    Second batch: the decision is "skip", rejected, r2 stays served. SkillClaw keeps its
    own mark; the loop only reads it."""
    from recipes.engine.worker import Worker
    from reef_cli.core.tree import starter_tree
    from tests.recipes.skillclaw.test_skillclaw import MARKER, Claw, decision

    claw = Claw()
    claw.server.start()
    try:
        monkeypatch.setenv("REEF_MODEL", "openai/scripted")
        monkeypatch.setenv("REEF_API_BASE", claw.api_base)
        scenarios.create("shop")
        publish_files("shop", starter_tree().files(), reason="start")
        claw.decisions.append(
            decision(
                "create_skill",
                skill="run-the-suite",
                description="Run the whole test suite before saying a change is done.",
                body=f"1. Run the whole test suite and show it passes ({MARKER}).\n"
                "2. Name the tests that ran.",
                sessions=["S1", "S2"],
                why="S1 and S2 were told the tests never ran.",
            )
        )
        # five sessions: five replay tasks, enough for the gate's sign test (3 are not)
        stack = live(Worker(), recipe="skillclaw", min_interval_s=0, batch_size=5)
        for name in ("s1", "s2", "s3", "s4", "s5"):
            stack.session("shop", name, score=0.0, feedback="you never ran the tests")
        wait_for(
            lambda: (
                (stack.state("shop")["last_run"] or {}).get("state") not in (None, *jobs.ACTIVE)
            ),
            "the skillclaw run",
            deadline_s=240,
        )
        run = stack.state("shop")["last_run"]
        assert (run["state"], run["release"], run["recipe"]) == ("published", 2, "skillclaw"), run
        assert stack.chat("shop", None, "next").headers[RELEASE_HEADER] == "2"
        chain = scenarios.get("shop").chain()
        assert chain.get(2).meta.source == "recipe:skillclaw"
        assert "skills/run-the-suite/SKILL.md" in chain.files(chain.get(2))
        mark = json.loads((stack.home / "scenarios/shop/skillclaw.json").read_text())
        assert {f"session:s{i}" for i in range(1, 6)} <= set(mark["sessions"])

        for name in ("t1", "t2", "t3", "t4", "t5"):
            stack.session("shop", name, score=1.0, feedback="fine")
        wait_for(
            lambda: (
                stack.state("shop")["runs"] == 2
                and stack.state("shop")["last_run"]["state"] not in jobs.ACTIVE
            ),
            "the second skillclaw run",
            deadline_s=240,
        )
        run = stack.state("shop")["last_run"]
        # five accepted sessions and one unscored request the judge did not pass: one
        # answer a candidate could win, so the batch is held back for more, not consumed
        assert run["state"] == "unchanged" and run["release"] is None, run
        assert run["message"].startswith("1 of 6 replayable session(s) were not accepted")
        assert stack.chat("shop", None, "still").headers[RELEASE_HEADER] == "2"
        assert [r.number for r in chain.releases()] == [1, 2]
        stack.polls(5)
        assert stack.state("shop")["runs"] == 2  # the held batch starts nothing again
    finally:
        claw.server.stop()


def test_the_real_worker_runs_gepa_publishes_and_then_keeps_the_served_release(
    live, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``recipes.engine.worker.Worker`` + the GEPA recipe on the real gepa engine; the scripted
    model answers by content (tests/recipes/gepa). First run: GEPA finds the rule and
    publishes r2, served to the next request. Second run: nothing helps, rejected, r2
    stays served."""
    from recipes.engine.worker import Worker
    from tests.recipes.gepa.test_gepa import sums
    from tests.recipes.gepa_model import GOOD, USELESS, Sums

    model = Sums(GOOD)
    model.server.start()
    try:
        monkeypatch.setenv("REEF_MODEL", "openai/scripted")
        monkeypatch.setenv("REEF_API_BASE", model.api_base)
        from reef_cli.core.tree import starter_tree

        scenarios.create("shop")
        publish_files("shop", starter_tree().files(), reason="start")
        tasks = sums().model_dump(exclude_none=True)
        (home / "scenarios/shop/tasks.yaml").write_text(json.dumps(tasks))
        stack = live(Worker(), recipe="gepa", min_interval_s=0, options={"max_metric_calls": 30})
        for name in ("s1", "s2", "s3"):
            stack.session("shop", name)
        wait_for(
            lambda: (
                (stack.state("shop")["last_run"] or {}).get("state") not in (None, *jobs.ACTIVE)
            ),
            "the gepa run",
            deadline_s=240,
        )
        run = stack.state("shop")["last_run"]
        ended = jobs.get(run["job"]).message
        assert (run["state"], run["release"]) == ("published", 2), (run, ended)
        assert stack.chat("shop", None, "next").headers[RELEASE_HEADER] == "2"
        meta = scenarios.get("shop").chain().get(2).meta
        assert meta.source == "recipe:gepa" and meta.status == "live"
        mark = json.loads((stack.home / "scenarios/shop/gepa.json").read_text())
        assert {"session:s1", "session:s2", "session:s3"} <= set(mark["sessions"])

        model.proposal = USELESS
        for name in ("t1", "t2", "t3"):
            stack.session("shop", name)
        wait_for(
            lambda: (
                stack.state("shop")["runs"] == 2
                and stack.state("shop")["last_run"]["state"] not in jobs.ACTIVE
            ),
            "the second gepa run",
            deadline_s=240,
        )
        run = stack.state("shop")["last_run"]
        assert run["state"] == "rejected" and run["release"] is None, run
        assert stack.chat("shop", None, "still").headers[RELEASE_HEADER] == "2"
        assert [r.number for r in scenarios.get("shop").chain().releases()] == [1, 2]
    finally:
        model.server.stop()


# ------------------------------------------------------------------ config


def test_serve_yaml_reef_section(tmp_path: Path) -> None:
    path = tmp_path / "serve.yaml"
    path.write_text(
        "upstream: http://127.0.0.1:9/v1\n"
        "reef:\n"
        "  recipe: skillclaw\n"
        "  batch-size: 4\n"
        "  max_staleness: 1\n"
        "  min_interval_s: 30\n"
        "  publish: review\n"
        "  scenarios: [shop, cafe]\n"
        "  poll_s: 0.5\n"
    )
    config = build(load_file(path))
    assert config.reef is not None
    assert config.reef.model_dump() == {
        "recipe": "skillclaw",
        "batch_size": 4,
        "max_staleness": 1,
        "min_interval_s": 30.0,
        "publish": "review",
        "scenarios": ["shop", "cafe"],
        "poll_s": 0.5,
        "adapter": None,
        "options": {},
    }
    path.write_text("upstream: http://127.0.0.1:9/v1\nreef:\n")
    assert build(load_file(path)).reef is None


@pytest.mark.parametrize(
    ("section", "needle"),
    [
        ({"recipe": "reefine"}, "'reef.recipe': reefine learns from an ask"),
        (
            {"recipe": "nope"},
            "'reef.recipe': unknown recipe 'nope': use gepa, meta-harness or skillclaw",
        ),
        ({}, "'reef.recipe': Field required"),
        ({"recipe": "gepa", "batch_size": 0}, "'reef.batch_size'"),
        ({"recipe": "gepa", "poll_s": 0}, "'reef.poll_s'"),
        ({"recipe": "gepa", "max_staleness": -1}, "'reef.max_staleness'"),
        ({"recipe": "gepa", "publish": "later"}, "'reef.publish'"),
        ({"recipe": "gepa", "scenarios": ["Bad Name"]}, "'reef.scenarios'"),
        ({"recipe": "gepa", "batch": 3}, "'reef.batch': Extra inputs are not permitted"),
    ],
)
def test_bad_reef_settings_are_one_line_errors_naming_the_key(
    section: dict[str, Any], needle: str
) -> None:
    with pytest.raises(ServeError) as caught:
        build({"upstream": "http://127.0.0.1:9/v1", "reef": section})
    line = caught.value.one_line()
    assert needle in line and "\n" not in line and "fix the flag or the -c file" in line


def test_recipe_flag_turns_the_loop_on_and_reefine_keeps_its_old_meaning() -> None:
    base: dict[str, Any] = {"upstream": "http://127.0.0.1:9/v1"}
    assert build(with_recipe(base, None)).reef is None
    assert build(with_recipe(base, "reefine")).reef is None  # accepted, as before
    loop = build(with_recipe(base, "skillclaw")).reef
    assert loop is not None and (loop.recipe, loop.batch_size, loop.max_staleness) == (
        "skillclaw",
        8,
        2,
    )
    assert (loop.min_interval_s, loop.publish, loop.poll_s) == (600.0, "auto", 2.0)
    filed = {**base, "reef": {"recipe": "gepa", "batch_size": 2}}
    flagged = build(with_recipe(filed, "skillclaw")).reef
    assert flagged is not None and (flagged.recipe, flagged.batch_size) == ("skillclaw", 2)


def test_reef_serve_refuses_a_bad_recipe_before_it_binds() -> None:
    from tests.cli.helpers import reef_fails

    line = reef_fails("serve", "--upstream", "http://127.0.0.1:9/v1", "--recipe", "reefin")
    assert "reef.recipe" in line and "gepa, meta-harness or skillclaw" in line


def test_job_files_from_before_publish_still_load(home: Path) -> None:
    job = jobs.create("shop", "gepa", None)
    path = home / "jobs" / f"{job.id}.json"
    data = json.loads(path.read_text())
    del data["publish"], data["origin"]
    path.write_text(json.dumps(data))
    old = jobs.get(job.id)
    assert (old.publish, old.origin) == ("auto", "api")
    assert jobs.create("shop", "gepa", None, publish="review").publish == "review"
    with pytest.raises(ValueError, match="auto or review"):
        jobs.create("shop", "gepa", None, publish="maybe")


# ------------------------------------------------------------ training modes, POST /reef/train


def _train(stack: Live, scenario: str | None = "shop", token: str | None = TOKEN) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    body = {"scenario": scenario} if scenario is not None else {}
    return httpx.post(stack.url + "/reef/train", json=body, headers=headers, timeout=90)


def test_manual_mode_waits_for_train_which_runs_on_what_is_eligible(live) -> None:
    first_release("shop")
    scenarios.update("shop", training_mode="manual")
    runner = Recording(end=publishes)
    stack = live(runner, batch_size=3)
    for name in ("s1", "s2", "s3", "s4"):
        stack.session("shop", name)
    wait_for(lambda: counted(stack, eligible=4), "the count")
    stack.polls()
    state = stack.state("shop")
    assert runner.jobs == [] and state["next_trigger"]["waits_for"] == "train"
    assert "POST /reef/train" in state["next_trigger"]["detail"]

    r = _train(stack)
    assert r.status_code == 202, r.text
    job = r.json()
    assert (job["scenario"], job["recipe"], job["origin"]) == ("shop", "gepa", "train")
    assert [j.id for j in runner.jobs] == [job["id"]]
    wait_for(lambda: stack.state("shop")["last_run"]["state"] == "published", "the run's end")
    assert stack.chat("shop", None, "and now?").headers[RELEASE_HEADER] == "2"


def test_hybrid_trains_early_and_auto_refuses(live) -> None:
    first_release("shop")
    runner = Recording(end=publishes)
    stack = live(runner, batch_size=5, min_interval_s=3600)
    stack.session("shop", "s1")
    wait_for(lambda: counted(stack, eligible=1), "the count")
    refused = _train(stack)
    assert refused.status_code == 409
    assert "training_mode is auto" in refused.json()["error"]["message"]
    assert "--training-mode hybrid" in refused.json()["error"]["hint"]
    r = httpx.patch(
        stack.url + "/reef/scenarios/shop", json={"training_mode": "hybrid"}, headers=AUTH
    )
    assert r.status_code == 200 and r.json()["training_mode"] == "hybrid"
    r = _train(stack)  # one session of five: a run now all the same
    assert r.status_code == 202, r.text
    wait_for(lambda: stack.state("shop")["last_run"]["state"] == "published", "the run's end")
    assert stack.state("shop")["last_run"]["sessions"] == 1


def test_train_refusals_are_one_line_and_start_nothing(live) -> None:
    first_release("shop")
    first_release("team-a")
    scenarios.update("shop", training_mode="manual")
    scenarios.update("team-a", training_mode="manual")
    runner = Recording()  # leaves every job queued
    stack = live(runner, scenarios=["shop"])
    stack.polls()
    nothing = _train(stack)
    assert (
        nothing.status_code == 409
        and "no eligible scored session" in nothing.json()["error"]["message"]
    )
    stack.session("shop", "s1")
    assert _train(stack).status_code == 202
    busy = _train(stack)  # its job is still queued
    assert busy.status_code == 409 and "queued" in busy.json()["error"]["message"]
    assert _train(stack, "team-a").status_code == 409  # the loop does not learn for it
    assert _train(stack, "team-a", LIMITED).status_code == 409
    assert _train(stack, "shop", LIMITED).status_code == 403
    assert _train(stack, "shop", None).status_code == 401
    assert _train(stack, "Bad_Name").status_code == 400
    assert _train(stack, "nope").status_code == 404
    bad = httpx.post(stack.url + "/reef/train", json={"scenario": "shop", "x": 1}, headers=AUTH)
    assert bad.status_code == 400
    assert len(runner.jobs) == 1


def test_train_without_a_live_loop_names_the_fix(make_stack) -> None:
    stack = make_stack("openai")
    scenarios.create("shop")
    r = httpx.post(stack.url + "/reef/train", json={"scenario": "shop"}, headers=AUTH)
    assert r.status_code == 409 and "--recipe" in r.json()["error"]["hint"]


def test_a_training_mode_is_checked_where_it_is_set_and_read(tmp_path: Path) -> None:
    from reef_cli.core.errors import OptionInvalid, StateError

    scenarios.create("shop")
    with pytest.raises(OptionInvalid):
        scenarios.update("shop", training_mode="sometimes")
    assert scenarios.get("shop").training_mode == "auto"
    meta = scenarios.get("shop").path / scenarios.SCENARIO_FILE
    meta.write_text(meta.read_text() + 'training_mode = "weekly"\n')
    with pytest.raises(StateError, match="training_mode 'weekly'"):
        scenarios.get("shop")

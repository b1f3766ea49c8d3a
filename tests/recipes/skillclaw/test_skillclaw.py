"""SkillClaw end to end through the engine, against a scripted model on a real port and a
seeded records store (records + harvested transcripts + reports).

The scripted model answers by the system prompt of each call: the session judge, the
decision and the verifier answer what the test scripted; a replay task's answer is good
only when the tree in its system prompt holds ``MARKER``, and the replay judge scores a
good answer 1, any other 0. So a candidate that adds the marker wins every replay task.
"""

from __future__ import annotations

import json
import random
import string
from collections import deque
from collections.abc import Iterator
from typing import Any

import pytest

from recipes import engine
from recipes.skillclaw import decide, rules, signals
from recipes.skillclaw import verify as verify_mod
from recipes.skillclaw.decide import Edit, Group
from recipes.skillclaw.merge import keeps_items, lost_lines, merge_bodies, same_name
from recipes.skillclaw.recipe import MARK_NAME, SkillClaw, limits_for, options_from
from recipes.skillclaw.signals import Scored, implicit, is_correction
from recipes.skillclaw.skills import SkillText, skills_of
from recipes.tasks import scoring
from reef_cli.core import plugins, scenarios
from reef_cli.core.budget import Budget
from reef_cli.core.errors import OptionInvalid
from reef_cli.core.evidence import Mark, SessionEvidence, Turn
from reef_cli.core.llm import ModelClient
from reef_cli.core.paired_rule import sign_test_minimum
from reef_cli.core.publishing import publish_files
from reef_cli.core.records import HarvestedSession
from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.core.tree import parse_files, starter_tree
from tests.cli.helpers import runner
from tests.fakes.records import scored_exchange
from tests.fakes.server_thread import ServerThread
from tests.fakes.upstream import FakeUpstream
from tests.fakes.upstream import Turn as Reply

MARKER = "suite-check-41"
GOOD = "GOOD ANSWER: I ran the whole suite."
RNG = random.Random(1414)


def planted_key() -> str:
    """A fake OpenAI project key, assembled at run time (no key-shaped literal here)."""
    alphabet = string.ascii_letters + string.digits
    return "sk-" + "proj-" + "".join(RNG.choice(alphabet) for _ in range(56))


def verdict(score: float, reason: str = "It follows from the feedback.") -> Reply:
    return Reply(text=json.dumps({"score": score, "reason": reason}))


def decision(action: str = "skip", **fields: Any) -> Reply:
    return Reply(text=json.dumps({"action": action, **fields}))


class Claw:
    """The scripted model, told apart by each call's system prompt."""

    def __init__(self) -> None:
        self.decisions: deque[Reply] = deque()
        self.judges: deque[Reply] = deque()
        self.lines: deque[Reply] = deque()  # rules.Line answers; none left: kind "none"
        self.verifier = verdict(0.9)
        self.fake = FakeUpstream(chooser=self._choose)
        self.server = ServerThread(self.fake.app, timeout_graceful_shutdown=1)

    @property
    def api_base(self) -> str:
        return self.server.url + "/v1"

    def _choose(self, _path: str, body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        first = messages[0] if messages else {}
        system = first.get("content", "") if first.get("role") == "system" else ""
        if system == decide.SYSTEM:
            return self.decisions.popleft() if self.decisions else decision("skip")
        if system == rules.SYSTEM:
            return self.lines.popleft() if self.lines else Reply(text='{"kind": "none"}')
        if system == signals.JUDGE_SYSTEM:
            return self.judges.popleft() if self.judges else verdict(0.5)
        if system == verify_mod.SYSTEM:
            return self.verifier
        if system == scoring.JUDGE_SYSTEM:
            answer = str(messages[-1]["content"]).split("\nAnswer:\n", 1)[-1]
            return verdict(1.0 if GOOD in answer else 0.0)
        return Reply(text=GOOD if MARKER in system else "Here is an answer.")

    def bodies(self, system: str | None = None) -> list[dict[str, Any]]:
        out = []
        for entry in self.fake.log:
            if entry.path != "/v1/chat/completions":
                continue
            messages = entry.body.get("messages") or []
            if system is None or (messages and messages[0].get("content") == system):
                out.append(entry.body)
        return out


@pytest.fixture
def claw() -> Iterator[Claw]:
    model = Claw()
    with model.server:
        yield model


def demo(name: str = "demo") -> str:
    scenarios.create(name)
    publish_files(name, starter_tree().files(), reason="start")
    return name


def seed_session(
    scenario: str,
    sid: str,
    *,
    ask: str = "add a test for the parser",
    answer: str = "I wrote the test.",
    turns: list[dict[str, str]] | None = None,
    skills: tuple[str, ...] = ("write-tests",),
    score: float | None = 0.0,
    feedback: str | None = "you forgot to run the tests",
) -> list[str]:
    """One session: a record, its harvested transcript and a report; its receipts."""
    store = SQLiteStore()
    rec = scored_exchange(store, scenario, sid, ask, answer, score=score, feedback=feedback)
    store.upsert_harvested(
        [
            HarvestedSession(
                agent="pi",
                session_id=f"pi-{sid}",
                path=f"/sessions/{sid}.jsonl",
                record_session_id=sid,
                turns=turns
                or [{"role": "user", "text": ask}, {"role": "assistant", "text": answer}],
                skills_used=list(skills),
                receipts=[rec.id],
            )
        ]
    )
    return [rec.id]


def seed_failures(scenario: str = "demo", n: int = 5, prefix: str = "t") -> dict[str, list[str]]:
    """``n`` sessions that used write-tests and were told they forgot to run the tests."""
    return {
        f"session:{prefix}{i}": seed_session(scenario, f"{prefix}{i}", ask=f"add a test for mod{i}")
        for i in range(1, n + 1)
    }


def run(
    claw: Claw,
    *,
    budget: Budget | None = None,
    options: dict[str, Any] | None = None,
    scenario: str = "demo",
) -> engine.Outcome:
    llm = ModelClient(
        "openai/scripted", api_base=claw.api_base, budget=budget or Budget(), retries=0, timeout=20
    )
    return engine.run(scenarios.get(scenario), engine.recipe_named("skillclaw", options), model=llm)


def starter_body() -> str:
    return skills_of(starter_tree().files())["write-tests"].body.strip()


def improved() -> str:
    return starter_body() + f"\n4. Run the whole test suite and show it passes ({MARKER})."


def mark_of(scenario: str = "demo") -> dict[str, str]:
    scenarios.get(scenario)
    return Mark.load(SQLiteStore(), scenario, MARK_NAME).sessions


def releases(scenario: str = "demo") -> list[int]:
    return [r.number for r in scenarios.get(scenario).chain().releases()]


# ------------------------------------------------------------------ end to end


def test_an_improve_edit_is_published_citing_its_sessions_and_receipts(claw: Claw) -> None:
    demo()
    seeded = seed_failures()
    claw.decisions.append(
        decision(
            "improve_skill",
            skill="write-tests",
            body=improved(),
            sessions=["S1", "s2"],
            why="S1 and S2 show the agent did not run the tests.",
        )
    )
    outcome = run(claw)
    assert outcome.state == "published", outcome.message
    chain = scenarios.get("demo").chain()
    release = chain.get(2)
    files = chain.files(release)
    skill = files["skills/write-tests/SKILL.md"]
    old = starter_tree().files()["skills/write-tests/SKILL.md"]
    assert skill.startswith(old.split("\n---\n")[0] + "\n---\n")  # frontmatter kept
    assert MARKER in skill and not lost_lines(starter_body(), skill)
    parse_files(files)  # still a valid tree
    meta = release.meta.model_dump()
    claw_meta = meta["skillclaw"]
    keys = list(seeded)
    assert claw_meta["sessions"] == keys and claw_meta["receipts"] == seeded
    (edit,) = claw_meta["edits"]
    assert edit["kind"] == "improve_skill" and edit["skill"] == "write-tests"
    assert edit["sessions"] == keys[:2]
    assert edit["receipts"] == seeded[keys[0]] + seeded[keys[1]]
    assert edit["verifier"] == 0.9 and edit["path"] == "skills/write-tests/SKILL.md"
    assert claw_meta["reported"] == 5 and claw_meta["dropped"] == []
    assert meta["changes"][0]["summary"] == "improved skill write-tests (from 2 sessions)"
    # judged on the batch's own replay tasks: five requests, each won
    assert claw_meta["replay"] == {f"replay-s{i}": key for i, key in enumerate(keys, 1)}
    numbers = meta["evaluation"]["numbers"]
    assert (numbers["tasks"], numbers["wins"], numbers["candidate_mean"]) == (5, 5, 1.0)
    # the decision saw the skill's text and the feedback; the mark holds the batch
    prompt = claw.bodies(decide.SYSTEM)[0]["messages"][-1]["content"]
    assert "1. Find the test file" in prompt and "you forgot to run the tests" in prompt
    assert set(mark_of()) == set(keys)
    assert meta["budget"]["calls"] == len(claw.bodies())


def test_an_edit_citing_unknown_sessions_is_dropped_and_the_batch_still_consumed(
    claw: Claw,
) -> None:
    demo()
    seeded = seed_failures()
    claw.decisions.append(
        decision("improve_skill", skill="write-tests", body=improved(), sessions=["S9"])
    )
    outcome = run(claw)
    assert outcome.state == "rejected" and outcome.message == "the recipe proposed no change"
    (dropped,) = outcome.evidence["skillclaw"]["dropped"]
    assert dropped["why"] == "cites sessions not in this batch: S9"
    assert dropped["edit"]["kind"] == "improve_skill"
    assert claw.bodies(verify_mod.SYSTEM) == []  # refused before the verifier
    assert releases() == [1] and set(mark_of()) == set(seeded)  # judged: consumed


def test_a_create_colliding_with_a_skill_is_merged_keeping_every_item(claw: Claw) -> None:
    demo()
    seed_failures()
    proposed = (
        "1. Write the failing test first.\n"
        f"2. Run the whole test suite and show it passes ({MARKER}).\n"
        "3. Find the test file that mirrors the module you touch."
    )
    claw.decisions.append(
        decision(
            "create_skill",
            skill="Write_Tests",
            description="Tests, run",
            body=proposed,
            sessions=["S1"],
        )
    )
    outcome = run(claw)
    assert outcome.state == "published", outcome.message
    chain = scenarios.get("demo").chain()
    files = chain.files(chain.get(2))
    assert [p for p in files if p.startswith("skills/")] == ["skills/write-tests/SKILL.md"]
    body = skills_of(files)["write-tests"].body
    assert keeps_items(body, starter_body(), proposed)
    assert body.strip().startswith(starter_body())  # the existing body, whole, first
    assert "4. Write the failing test first." in body  # numbering continues
    assert "5. Run the whole test suite" in body
    assert body.count("Find the test file") == 1  # a line both had is not repeated
    (edit,) = chain.get(2).meta.model_dump()["skillclaw"]["edits"]
    assert edit["merge"] == {"into": "write-tests", "used": "appended", "appended": 2}
    assert (
        skills_of(files)["write-tests"].description
        == skills_of(starter_tree().files())["write-tests"].description
    )


def test_another_scenarios_sessions_are_never_read(claw: Claw) -> None:
    demo()
    demo("other")
    seed_session("other", "o1", ask="OTHER-SCENARIO request", feedback="OTHER-SCENARIO feedback")
    mine = {"session:d1": seed_session("demo", "d1", ask="add a test for mine")}
    mine |= seed_failures(n=4)  # enough for the replay gate: the job reads and decides
    outcome = run(claw)
    assert outcome.state == "rejected" and claw.bodies(decide.SYSTEM)
    assert outcome.evidence["skillclaw"]["sessions"] == list(mine)
    assert outcome.evidence["skillclaw"]["receipts"] == mine
    assert all("OTHER-SCENARIO" not in json.dumps(b) for b in claw.bodies())
    assert mark_of("other") == {} and set(mark_of()) == set(mine)


def test_a_failed_or_stopped_job_leaves_the_mark_and_the_next_run_reads_it_again(
    claw: Claw,
) -> None:
    demo()
    seed_failures()
    claw.decisions.append(Reply(status=500, error="upstream down"))
    failed = run(claw)
    assert failed.state == "failed", failed.message
    assert mark_of() == {}
    claw.decisions.append(
        decision("improve_skill", skill="write-tests", body=improved(), sessions=["S1"])
    )
    # the complaint's rules call and the decision, then no verifier
    stopped = run(claw, budget=Budget(max_calls=2))
    assert stopped.state == "stopped" and "model-call budget" in stopped.message
    assert mark_of() == {} and releases() == [1]
    again = run(claw)  # the same five sessions, read again
    assert again.state == "rejected" and len(again.evidence["skillclaw"]["sessions"]) == 5
    assert len(mark_of()) == 5


def test_a_rerun_with_nothing_new_makes_no_model_call_and_ends_unchanged(
    claw: Claw, monkeypatch: pytest.MonkeyPatch
) -> None:
    demo()
    empty = run(claw)  # no session at all yet
    assert empty.state == "unchanged" and empty.message == "nothing new to learn from"
    assert claw.bodies() == []
    seed_failures()
    assert run(claw).state == "rejected"  # skipped: consumed all the same
    calls = len(claw.bodies())
    again = run(claw)
    assert again.state == "unchanged" and again.evidence["skillclaw"]["sessions"] == []
    assert len(claw.bodies()) == calls
    # and through the CLI: exit 0, nothing published, no call
    from reef_cli.cli.main import app

    monkeypatch.setenv("REEF_MODEL", "openai/scripted")
    monkeypatch.setenv("REEF_API_BASE", claw.api_base)
    result = runner.invoke(
        app, ["evolve", "--recipe", "skillclaw", "-s", "demo", "--yes", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["state"] == "unchanged"
    assert len(claw.bodies()) == calls and releases() == [1]


def test_fewer_sessions_than_the_sign_test_needs_are_kept_for_the_next_run(claw: Claw) -> None:
    demo()
    least = sign_test_minimum()
    assert least == 5  # 2**-5 <= 0.05 < 2**-4: five wins and no loss, at the least
    seed_failures(n=least - 1)
    held = run(claw)
    assert held.state == "unchanged", held.message
    assert held.message.startswith("4 new session(s): the replay's sign test needs at least 5")
    assert held.message.endswith("kept for the next run")
    assert claw.bodies() == [] and mark_of() == {}  # no call spent, nothing consumed
    seed_failures(n=1, prefix="late")  # one more session: now the gate could publish
    claw.decisions.append(
        decision("improve_skill", skill="write-tests", body=improved(), sessions=["S1", "S2"])
    )
    outcome = run(claw)
    assert outcome.state == "published", outcome.message
    assert outcome.evidence["evaluation"]["numbers"]["tasks"] == least
    assert len(mark_of()) == least  # the four kept back, and the new one


def test_a_batch_capped_below_the_minimum_says_to_raise_batch_limit(claw: Claw) -> None:
    demo()
    seed_failures(n=6)
    held = run(claw, options={"batch_limit": 3})
    assert held.state == "unchanged" and "raise batch_limit to at least 5" in held.message
    assert claw.bodies() == [] and mark_of() == {}


def test_sessions_that_cannot_be_replayed_do_not_count_and_the_batch_is_kept(
    claw: Claw,
) -> None:
    demo()
    seed_failures(n=2)
    for i in range(3):  # no reply to any answer: judged, and the judge is down
        seed_session("demo", f"quiet{i}", skills=(), score=None, feedback=None)
    claw.judges.extend(Reply(status=500, error="judge down") for _ in range(3))
    held = run(claw)
    assert held.state == "unchanged", held.message
    assert held.message.startswith("2 of 5 new session(s) can be replayed")
    notes = held.evidence["skillclaw"]
    assert len(notes["waiting"]) == 3 and notes["held_back"] == held.message
    assert claw.bodies(decide.SYSTEM) == []  # nothing decided from what cannot publish
    assert mark_of() == {}  # all five read again next time
    again = run(claw)  # the judge is back: five scored sessions, five replay tasks
    assert again.state == "rejected" and len(mark_of()) == 5


def test_a_planted_secret_never_reaches_the_model_the_tree_or_the_metadata(claw: Claw) -> None:
    demo()
    key, invented = planted_key(), planted_key()
    seed_failures()
    leaky = seed_session(
        "demo",
        "leak",
        skills=(),
        turns=[
            {"role": "user", "text": f"deploy it, the key is {key}"},
            {"role": "assistant", "text": "Deployed."},
            {"role": "user", "text": "no, that's wrong: it went to staging"},
        ],
        score=None,
        feedback=f"it printed {key} in the log",
    )
    claw.decisions.append(
        decision(
            "improve_skill",
            skill="write-tests",
            body=improved(),
            sessions=["S1", "S2"],
        )
    )
    claw.decisions.append(  # the no-skill group: a skill that holds a credential
        decision(
            "create_skill",
            skill="deploy-safely",
            description="Deploy to the right place",
            body=f"1. Export OPENAI_API_KEY={invented} first.\n2. Deploy to production.",
            sessions=["S6"],
        )
    )
    outcome = run(claw)
    assert outcome.state == "published", outcome.message
    chain = scenarios.get("demo").chain()
    release = chain.get(2)
    stored = json.dumps(chain.files(release)) + release.meta.model_dump_json()
    sent = json.dumps(claw.bodies())
    shown = json.dumps(outcome.to_json())
    for text in (stored, sent, shown):
        assert key not in text and invented not in text
    assert "skills/deploy-safely/SKILL.md" not in chain.files(release)
    dropped = release.meta.model_dump()["skillclaw"]["dropped"]
    assert dropped == [
        {
            "edit": {
                "kind": "create_skill",
                "skill": "deploy-safely",
                "group": "(no skill)",
                "sessions": ["session:leak"],
            },
            "why": "held a credential",
        }
    ]
    assert release.meta.model_dump()["skillclaw"]["receipts"]["session:leak"] == leaky
    # the withheld turn was not the one the decision or the replay quoted
    assert "went to staging" in sent


def test_a_judge_outage_leaves_the_session_waiting_for_the_next_run(claw: Claw) -> None:
    demo()
    seed_failures()
    seed_session("demo", "quiet", skills=(), score=None, feedback=None)  # no reply: judged
    claw.judges.append(Reply(status=500, error="judge down"))
    first = run(claw)
    assert first.state == "rejected"
    notes = first.evidence["skillclaw"]
    assert notes["waiting"] == ["session:quiet"] and notes["judged"] == 0
    assert "session:quiet" not in mark_of() and len(mark_of()) == 5
    claw.judges.append(verdict(0.3, "The test was not run."))
    seed_failures(n=4, prefix="more")  # with the waiting one, enough for the replay gate
    second = run(claw)
    assert second.evidence["skillclaw"]["sessions"][0] == "session:quiet"
    assert second.evidence["skillclaw"]["judged"] == 1
    assert second.evidence["skillclaw"]["scores"]["session:quiet"] == {
        "score": 0.3,
        "source": "judged",
    }
    assert "session:quiet" in mark_of()


def test_the_implicit_signal_is_read_from_the_turns_without_a_judge(claw: Claw) -> None:
    demo()
    seed_session(
        "demo",
        "talk",
        score=None,
        feedback=None,
        turns=[
            {"role": "user", "text": "add a test for the cache"},
            {"role": "assistant", "text": "Added test_cache."},
            {"role": "user", "text": "that's wrong, you forgot the expiry case"},
            {"role": "assistant", "text": "Added the expiry case."},
            {"role": "user", "text": "thanks, now the docs"},
            {"role": "assistant", "text": "Updated the docs."},
        ],
    )
    seed_failures(n=4)  # enough sessions for the replay gate to run the job
    outcome = run(claw)
    notes = outcome.evidence["skillclaw"]
    assert notes["scores"]["session:talk"] == {"score": 0.5, "source": "implicit"}
    assert notes["implicit"] == 1 and claw.bodies(signals.JUDGE_SYSTEM) == []
    prompt = claw.bodies(decide.SYSTEM)[0]["messages"][-1]["content"]
    assert "Feedback: that's wrong, you forgot the expiry case" in prompt


def test_reef_evolve_schedule_nightly_prints_a_crontab_line_and_runs_nothing(
    claw: Claw,
) -> None:
    from reef_cli.cli.main import app

    demo()
    seed_failures(n=1)
    result = runner.invoke(
        app, ["evolve", "--recipe", "skillclaw", "-s", "demo", "--schedule", "nightly"]
    )
    assert result.exit_code == 0, result.output
    line = result.stdout.strip().splitlines()[0]
    minute, hour, *_rest = line.split()
    assert 0 <= int(minute) < 60 and 0 <= int(hour) <= 5
    assert "evolve --recipe skillclaw -s demo --yes" in line
    executable = line.split(" evolve ")[0].split()[-1]
    assert executable.startswith("/") and executable.endswith("reef")
    assert claw.bodies() == [] and mark_of() == {}
    kept = runner.invoke(
        app,
        ["evolve", "--recipe", "skillclaw", "-s", "demo", "--schedule", "nightly", "--no-cache"],
    )
    assert kept.exit_code == 0 and kept.stdout.rstrip().splitlines()[0].count("--no-cache") == 1
    refused = runner.invoke(app, ["evolve", "-s", "demo", "--schedule", "nightly"])
    assert refused.exit_code == 2
    assert "(gepa, meta-harness, skillclaw), not reefine" in refused.output
    help_text = runner.invoke(app, ["evolve", "--help"]).output
    assert "skillclaw" in help_text and "--schedule" in help_text


# ------------------------------------------------------------------ the parts


def test_options_are_checked_and_the_budget_sized_for_the_batch() -> None:
    recipe = engine.recipe_named("skillclaw", {"batch_limit": 10, "threshold": 0.8})
    assert isinstance(recipe, SkillClaw) and recipe.options.threshold == 0.8
    assert (recipe.trials, recipe.requires_tasks) == (False, False)
    assert "skillclaw" in plugins.recipe_names()
    small, large = limits_for(options_from({"batch_limit": 1})), limits_for(options_from({}))
    assert small.calls is not None and large.calls is not None
    assert large.calls >= 3 * 50 + small.calls - 3
    assert recipe.revise(None, None, ["x"]) == []  # type: ignore[arg-type]
    for bad in ({"batch": 3}, {"batch_limit": 0}, {"batch_limit": True}, {"threshold": 2}):
        with pytest.raises(OptionInvalid):
            options_from(bad)


def test_corrections_and_moving_on_read_as_signals() -> None:
    for text in ("no, use the other file", "That's wrong", "it still fails", "you forgot x"):
        assert is_correction(text), text
    for text in ("thanks, now add docs", "great. next: the parser", "what does this do?"):
        assert not is_correction(text), text
    turns = [Turn("user", "a"), Turn("assistant", "b"), Turn("user", "it didn't work")]
    assert implicit(turns) == (0.0, ["it didn't work"])
    assert implicit([Turn("user", "a"), Turn("assistant", "b")]) is None


def test_merges_keep_every_line_and_improves_that_drop_one_are_refused() -> None:
    old = "# Deploy\n\n1. Build.\n2. Test.\n- never on Fridays"
    kept = merge_bodies(old, old + "\n3. Tag the release.")
    assert (kept.used, kept.appended) == ("model", 0) and "3. Tag the release." in kept.body
    appended = merge_bodies(old, "1. Build.\n2. Tag the release.")
    assert appended.used == "appended" and appended.body.endswith("3. Tag the release.")
    assert keeps_items(appended.body, old, "1. Build.\n2. Tag the release.")
    assert same_name("Write_Tests", "write-tests") and same_name("writetests", "write-tests")
    assert lost_lines(old, "# Deploy\n1. Build.\n3. Test.\n* never  on Fridays") == []
    before = SkillText("deploy", "Deploy safely", old, "---\nname: deploy\n---\n" + old)
    edit = Edit("improve_skill", "deploy", "", "1. Build.", "", "deploy", ["session:a"])
    why = verify_mod.problems(edit, before, before.with_body("1. Build.\n2. Test."))
    assert why == ["deletes guidance: 2 line(s) of the old body are gone (first: '# Deploy')"]
    huge = before.with_body(old + "\n" + "Check the logs. " * 300)
    assert any("at most 4000" in w for w in verify_mod.problems(edit, before, huge))
    junk = before.with_body(old + "\nSee {{docs_url}} for more.")
    assert any(w.startswith("debris:") for w in verify_mod.problems(edit, before, junk))
    cited_nothing = Edit("improve_skill", "deploy", "", "x", "", "deploy")
    assert "cites no session" in verify_mod.problems(
        cited_nothing, before, before.with_body(old + "\n3. Tag.")
    )


def test_skills_render_with_frontmatter_and_groups_count_unknown_skills_as_none() -> None:
    files = starter_tree().files()
    skill = skills_of(files)["write-tests"]
    described = skill.with_description("Write and run focused tests.").render()
    created = SkillText("new-skill", "Do the new thing", "1. Do it.").render()
    tree = parse_files({**files, skill.path: described, "skills/new-skill/SKILL.md": created})
    by_name = {s.name: s for s in tree.skills}
    assert by_name["write-tests"].description == "Write and run focused tests."
    assert by_name["new-skill"].body.strip() == "1. Do it."

    def scored(label: str, skills: list[str]) -> Scored:
        session = SessionEvidence(
            key=f"session:{label}",
            scenario="demo",
            session_id=label,
            receipts=[],
            release=None,
            first_at="",
            last_at="",
            skills_used=skills,
        )
        return Scored(session, label, score=0.5, source="reported")

    groups = decide.groups(
        [scored("S1", ["write-tests", "gone"]), scored("S2", ["gone"]), scored("S3", [])],
        {"write-tests"},
    )
    assert [(g.skill, [s.label for s in g.sessions]) for g in groups] == [
        (None, ["S2", "S3"]),
        ("write-tests", ["S1"]),
    ]
    assert isinstance(groups[0], Group) and groups[0].name == "(no skill)"

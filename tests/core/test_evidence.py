"""core.evidence: one scenario's sessions from a real records store — grouping, turns,
reports, harvested transcripts, withheld credentials, fingerprints, the mark and the
live loop's eligibility counts."""

from __future__ import annotations

import json
import random
import stat
import string
from typing import Any

from reef_cli.core import paths
from reef_cli.core.evidence import (
    MAX_TURN_CHARS,
    WITHHELD,
    Mark,
    SessionEvidence,
    collect,
    eligibility,
)
from reef_cli.core.records import HarvestedSession, Record, new_receipt
from reef_cli.core.reports import ReportIn, save_report
from reef_cli.core.store.sqlite import SQLiteStore
from tests.fakes.records import chat_answer, chat_record

RNG = random.Random(20250611)


def planted_key() -> str:
    """A fake OpenAI project key, assembled at run time (no key-shaped literal here)."""
    alphabet = string.ascii_letters + string.digits
    return "sk-" + "proj-" + "".join(RNG.choice(alphabet) for _ in range(56))


_clock = [0]


def stamp() -> str:
    _clock[0] += 1
    return f"2025-06-01T10:{_clock[0] // 60:02d}:{_clock[0] % 60:02d}.000000Z"


def record(
    scenario: str = "demo",
    session: str | None = None,
    ask: str = "fix the failing test",
    answer: str = "I fixed it.",
    *,
    release: int | None = None,
    state: str = "complete",
    history: list[dict[str, Any]] | None = None,
) -> Record:
    messages = [{"role": "system", "content": "HARNESS TEXT"}, *(history or [])]
    messages.append({"role": "user", "content": ask})
    return chat_record(
        scenario,
        {"model": "m", "messages": messages},
        chat_answer(answer),
        session_id=session,
        release_id=release,
        created_at=stamp(),
        state=state,
    )


def report(store: SQLiteStore, *receipts: str, score: float | None, feedback: Any = None) -> str:
    saved = save_report(
        store, ReportIn(score=score, feedback=feedback, references=list(receipts)), None
    )
    return saved.id


def by_key(sessions: list[SessionEvidence]) -> dict[str, SessionEvidence]:
    return {s.key: s for s in sessions}


def test_records_group_by_session_id_and_a_record_without_one_stands_alone() -> None:
    store = SQLiteStore()
    first = record(session="s-1", ask="add a retry to the client", answer="Added a retry.")
    # an agent's tool round trip repeats the last user message: not a new turn
    again = record(session="s-1", ask="add a retry to the client", answer="Ran the tests.")
    lone = record(ask="what is 2 + 2?", answer="4", release=3)
    store.insert_many([first, again, lone])
    sessions = by_key(collect(store, "demo"))
    assert set(sessions) == {"session:s-1", f"record:{lone.id}"}
    s1 = sessions["session:s-1"]
    assert s1.receipts == [first.id, again.id] and s1.session_id == "s-1"
    assert [(t.role, t.text) for t in s1.turns] == [
        ("user", "add a retry to the client"),
        ("assistant", "Added a retry."),
        ("assistant", "Ran the tests."),
    ]
    assert all("HARNESS" not in t.text for t in s1.turns)  # the system prompt is left out
    assert not s1.harvested and s1.skills_used == [] and s1.score is None
    alone = sessions[f"record:{lone.id}"]
    assert alone.session_id is None and alone.release == 3 and len(alone.turns) == 2


def test_reports_join_their_session_by_receipt() -> None:
    store = SQLiteStore()
    a1, a2 = record(session="a"), record(session="a", ask="now the docs")
    b = record(session="b")
    store.insert_many([a1, a2, b])
    first = report(store, a2.id, score=0.2, feedback="you forgot the changelog")
    second = report(store, a1.id, a2.id, score=0.6)  # one report, two receipts: once
    report(store, b.id, score=1.0)
    sessions = by_key(collect(store, "demo"))
    a = sessions["session:a"]
    assert [r.id for r in a.reports] == [first, second]
    assert a.reports[0].text == "you forgot the changelog"
    assert a.score == 0.4  # the mean of the reported scores
    assert sessions["session:b"].score == 1.0


def test_a_harvested_transcript_is_preferred_to_the_records() -> None:
    store = SQLiteStore()
    rec = record(session="reef-7", ask="from the records", answer="record answer")
    store.insert_many([rec])
    store.upsert_harvested(
        [
            HarvestedSession(
                agent="pi",
                session_id="pi-uuid",
                path="/x.jsonl",
                record_session_id="reef-7",
                turns=[
                    {"role": "user", "text": "write a test for the parser"},
                    {"role": "tool", "text": "ran pytest"},
                    {"role": "assistant", "text": "Added test_parser.py."},
                    {"role": "user", "text": "   "},
                ],
                skills_used=["write-tests", "write-tests"],
                receipts=[rec.id],
            )
        ]
    )
    session = collect(store, "demo")[0]
    assert session.harvested and session.skills_used == ["write-tests"]
    assert [(t.role, t.text) for t in session.turns] == [
        ("user", "write a test for the parser"),
        ("assistant", "Added test_parser.py."),
    ]


def test_credential_turns_and_feedback_are_withheld_before_anyone_sees_them() -> None:
    store = SQLiteStore()
    key, other = planted_key(), planted_key()
    rec = record(session="k", ask=f"use the key {key} to call the API", answer="Done.")
    # a key right at the cut: scanning only the first MAX_TURN_CHARS would keep its head
    long = record(session="k", ask="x" * (MAX_TURN_CHARS - 10) + " " + other)
    store.insert_many([rec, long])
    report(store, rec.id, score=0.0, feedback={"note": f"leaked {other}"})
    session = collect(store, "demo")[0]
    assert session.withheld == 2
    assert [t.text for t in session.turns if t.role == "user"] == [WITHHELD, WITHHELD]
    assert session.reports[0].text == WITHHELD
    dumped = json.dumps(session.to_json())
    assert key not in dumped and other not in dumped and other[:9] not in dumped


def test_the_fingerprint_changes_when_a_session_grows_or_a_report_arrives() -> None:
    store = SQLiteStore()
    first = record(session="g")
    store.insert_many([first])
    before = collect(store, "demo")[0].fingerprint
    assert collect(store, "demo")[0].fingerprint == before  # read twice: the same
    store.insert_many([record(session="g", ask="and the second part")])
    grown = collect(store, "demo")[0].fingerprint
    report(store, first.id, score=1.0)
    reported = collect(store, "demo")[0].fingerprint
    assert len({before, grown, reported}) == 3


def test_the_mark_skips_what_was_consumed_until_it_grows() -> None:
    store = SQLiteStore()
    store.insert_many([record(session="m")])
    harvest = HarvestedSession(
        agent="pi",
        session_id="pi-m",
        path="/m.jsonl",
        record_session_id="m",
        turns=[{"role": "user", "text": "hello"}, {"role": "assistant", "text": "hi"}],
    )
    store.upsert_harvested([harvest])
    folder = paths.ensure_state_dir() / "scenarios" / "demo"
    folder.mkdir(parents=True)
    mark = Mark.load(store, "demo", "skillclaw")
    sessions = collect(store, "demo")
    assert mark.new(sessions) == sessions  # no mark yet: everything is new
    mark.advance(sessions)
    assert stat.S_IMODE((folder / "skillclaw.json").stat().st_mode) == 0o600
    again = Mark.load(store, "demo", "skillclaw")
    assert again.sessions == mark.sessions and again.updated_at
    store.upsert_harvested([harvest])  # re-harvested, unchanged: skipped
    assert again.new(collect(store, "demo")) == []
    longer = HarvestedSession(
        **{**harvest.to_json(), "turns": [*harvest.turns, {"role": "user", "text": "more"}]}
    )
    store.upsert_harvested([longer])  # a longer transcript: new again
    assert [s.key for s in again.new(collect(store, "demo"))] == ["session:m"]
    # an unreadable mark reads as none: everything is new, nothing is lost
    (folder / "skillclaw.json").write_text("{not json", encoding="utf-8")
    assert Mark.load(store, "demo", "skillclaw").sessions == {}


def test_eligibility_counts_fresh_scored_sessions_and_names_the_stale_and_unscored() -> None:
    store = SQLiteStore()
    fresh, stale, old_ok = record(release=5), record(release=2), record(release=4)
    unscored, consumed = record(release=5), record(release=5)
    store.insert_many([fresh, stale, old_ok, unscored, consumed])
    for rec in (fresh, stale, old_ok, consumed):
        report(store, rec.id, score=0.5)
    sessions = collect(store, "demo")
    folder = paths.ensure_state_dir() / "scenarios" / "demo"
    folder.mkdir(parents=True)
    mark = Mark.load(store, "demo", "live")
    mark.advance([s for s in sessions if s.receipts == [consumed.id]])
    counted = eligibility(sessions, mark, served=5, max_staleness=1)
    assert {s.receipts[0] for s in counted.ready} == {fresh.id, old_ok.id}
    assert (counted.stale, counted.unscored) == (1, 1)
    assert counted.to_json()["eligible"] == 2
    unbounded = eligibility(sessions, mark, served=5, max_staleness=None)
    assert len(unbounded.ready) == 3 and unbounded.stale == 0


def test_another_scenarios_records_reports_and_transcripts_are_never_read() -> None:
    store = SQLiteStore()
    mine = record(session="shared", ask="mine")
    theirs = record("other", session="shared", ask="THEIR SECRET PLAN")
    store.insert_many([mine, theirs, record("other", ask="THEIRS ALONE")])
    report(store, theirs.id, score=0.0, feedback="THEIR FEEDBACK")
    # the same session id under two scenarios: its transcript mixes them, so it is not used
    store.upsert_harvested(
        [
            HarvestedSession(
                agent="pi",
                session_id="pi-shared",
                path="/s.jsonl",
                record_session_id="shared",
                turns=[{"role": "user", "text": "THEIR TRANSCRIPT"}],
                receipts=[mine.id, theirs.id],
            )
        ]
    )
    sessions = collect(store, "demo")
    assert [s.receipts for s in sessions] == [[mine.id]]
    dumped = json.dumps([s.to_json() for s in sessions])
    assert "THEIR" not in dumped and not sessions[0].harvested and sessions[0].reports == []


def test_streaming_records_wait_and_responses_api_turns_are_read() -> None:
    store = SQLiteStore()
    done = Record(
        id=new_receipt(),
        scenario="demo",
        client_dialect="responses",
        upstream_dialect="openai",
        session_id="r",
        request={"model": "m", "input": [{"role": "user", "content": "rename the module"}]},
        response={
            "output": [
                {"type": "reasoning", "content": []},
                {"type": "message", "content": [{"type": "output_text", "text": "Renamed."}]},
            ]
        },
        created_at=stamp(),
    )
    store.insert_many([done, record(session="r", state="streaming", ask="still going")])
    session = collect(store, "demo")[0]
    assert session.receipts == [done.id]
    assert [(t.role, t.text) for t in session.turns] == [
        ("user", "rename the module"),
        ("assistant", "Renamed."),
    ]

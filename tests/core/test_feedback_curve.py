"""The accept curve of the release page, read from a real SQLite store: one point per
reported session in the order it began, the releases that went live among them, the
split at the page's release and the sessions to adaptation after it."""

from __future__ import annotations

from reef_cli.core import scenarios
from reef_cli.core.feedback_curve import Side, build, feedback_curve
from reef_cli.core.publishing import publish_files, republish
from reef_cli.core.reports import ReportIn, save_report
from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.core.tree import starter_tree
from tests.fakes.records import chat_answer, chat_record

PAST = "2020-01-01T00:00:{:02d}.000000Z"


def session(
    store: SQLiteStore,
    scenario: str,
    sid: str,
    *scores: float,
    at: str | None = None,
    later: str | None = None,
) -> list[str]:
    """One session of ``scenario``: a record (at ``at``, default now), a second one at
    ``later`` if given, and one report per score on its last record; its receipts."""
    times = [at, later] if later else [at]
    records = [
        chat_record(
            scenario,
            {"messages": [{"role": "user", "content": "fix the parser"}]},
            chat_answer("done"),
            session_id=sid,
            **({"created_at": when} if when else {}),
        )
        for when in times
    ]
    store.insert_many(records)
    for score in scores:
        body = ReportIn(score=score, feedback="not what I asked", references=[records[-1].id])
        save_report(store, body, None)
    return [r.id for r in records]


def publish(scenario: str, marker: str) -> int:
    files = {**starter_tree().files(), "rules/learned.md": f"{marker}\n"}
    release, _ = publish_files(scenario, files, reason=marker)
    return release.number


def seeded() -> SQLiteStore:
    """demo: two sessions before r1, three between r1 and r2, five after r2."""
    scenarios.create("demo")
    store = SQLiteStore()
    # s1 began first but was reported on its later record: it is still first on the curve
    session(store, "demo", "s1", 0, at=PAST.format(1), later=PAST.format(5))
    session(store, "demo", "s2", 1, at=PAST.format(3))
    assert publish("demo", "one") == 1
    session(store, "demo", "s3", 0)
    session(store, "demo", "s4", 5)  # above the scale: clamped to 1, accepted
    session(store, "demo", "s5", 1, 0)  # two reports: the mean, 0.5, is not accepted
    assert publish("demo", "two") == 2
    for sid, score in (("s6", 1), ("s7", -3), ("s8", 1), ("s9", 1), ("s10", 1)):
        session(store, "demo", sid, score)
    return store


def test_points_marks_split_and_adaptation_at_each_release() -> None:
    store = seeded()
    releases = scenarios.get("demo").chain().releases()
    curve = feedback_curve(store, "demo", releases, 2)
    assert [p.session for p in curve.points] == [f"session:s{i}" for i in range(1, 11)]
    assert [p.index for p in curve.points] == list(range(1, 11))
    assert [p.score for p in curve.points] == [0, 1, 0, 1, 0.5, 1, 0, 1, 1, 1]
    assert [p.accepted for p in curve.points].count(True) == 6
    assert curve.points[4].reports == 2
    assert [(m.number, m.after, m.this) for m in curve.releases] == [(1, 2, False), (2, 5, True)]
    assert curve.live_at == releases[1].meta.created_at and curve.live_as == 2
    assert curve.before == Side(5, 2) and curve.after == Side(5, 4)
    assert curve.adaptation == 3  # s8, s9, s10: the third, fourth and fifth after r2
    assert not curve.limited

    first = feedback_curve(store, "demo", releases, 1)
    assert [(m.number, m.this) for m in first.releases] == [(1, True), (2, False)]
    assert first.before == Side(2, 1) and first.after == Side(8, 5)
    assert first.adaptation == 6  # s3 s4 s5 s6 s7 after r1, then s8 s9 s10


def test_no_three_in_a_row_is_not_yet_and_nothing_reported_is_empty() -> None:
    scenarios.create("demo")
    store = SQLiteStore()
    assert publish("demo", "one") == 1
    releases = scenarios.get("demo").chain().releases()
    empty = feedback_curve(store, "demo", releases, 1)
    assert empty.points == [] and empty.before == Side(0, 0) and empty.after == Side(0, 0)
    assert empty.adaptation is None and [m.number for m in empty.releases] == [1]
    for sid, score in (("a", 1), ("b", 1), ("c", 0), ("d", 1), ("e", 1)):
        session(store, "demo", sid, score)
    session(store, "demo", "unscored")  # a record, no report: not on the curve
    curve = feedback_curve(store, "demo", releases, 1)
    assert len(curve.points) == 5 and curve.after == Side(5, 4) and curve.adaptation is None


def test_another_scenarios_reports_never_show() -> None:
    store = seeded()
    scenarios.create("other")
    # the same session id under another scenario, earlier and reported: not demo's
    session(store, "other", "s1", 1, 1, at=PAST.format(0))
    session(store, "other", "x", 1, at=PAST.format(2))
    releases = scenarios.get("demo").chain().releases()
    curve = feedback_curve(store, "demo", releases, 2)
    assert [p.session for p in curve.points] == [f"session:s{i}" for i in range(1, 11)]
    assert curve.points[0].score == 0 and curve.points[0].at == PAST.format(1)
    other = feedback_curve(store, "other", [], 1)
    assert [(p.session, p.score) for p in other.points] == [("session:s1", 1), ("session:x", 1)]


def test_only_the_newest_sessions_are_read() -> None:
    store = seeded()
    releases = scenarios.get("demo").chain().releases()
    curve = feedback_curve(store, "demo", releases, 2, limit=4)
    shown = ["session:s7", "session:s8", "session:s9", "session:s10"]
    assert [p.session for p in curve.points] == shown
    assert curve.limited and curve.before == Side(0, 0) and curve.after == Side(4, 3)
    # r1 went live before the first point shown: only the newest such line is kept
    assert [(m.number, m.after) for m in curve.releases] == [(2, 0)]


def test_a_pending_release_is_split_where_its_promote_went_live() -> None:
    store = seeded()
    pending, _ = publish_files(
        "demo", {**starter_tree().files(), "rules/p.md": "p\n"}, reason="held", hold="review"
    )
    assert pending.meta.status == "pending"
    session(store, "demo", "s11", 1)
    held = feedback_curve(store, "demo", scenarios.get("demo").chain().releases(), pending.number)
    assert held.live_at is None and held.adaptation is None
    assert held.before == Side(11, 7) and held.after == Side(0, 0)
    promoted, _ = republish("demo", str(pending.number), source="promote", reason="ok")
    session(store, "demo", "s12", 0)
    releases = scenarios.get("demo").chain().releases()
    curve = feedback_curve(store, "demo", releases, pending.number)
    assert curve.live_as == promoted.number and curve.after == Side(1, 0)
    assert [(m.number, m.this) for m in curve.releases][-1] == (promoted.number, True)
    assert pending.number not in [m.number for m in curve.releases]


def test_build_orders_by_the_first_record_and_clamps() -> None:
    rows = [
        {"session": "session:b", "first_at": "2026-01-01T00:00:02+00:00", "score": 7.0},
        {"session": "session:a", "first_at": "2026-01-01T00:00:01.000000Z", "score": -1.0},
    ]
    curve = build(rows, [(1, "2026-01-01T00:00:01.500000Z")], 1, 1)
    assert [(p.session, p.score) for p in curve.points] == [("session:a", 0), ("session:b", 1)]
    assert curve.before == Side(1, 0) and curve.after == Side(1, 1)
    assert [(m.number, m.after) for m in curve.releases] == [(1, 1)]

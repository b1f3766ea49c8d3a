"""The accept curve a release page shows: a scenario's reported sessions over time and
the releases that went live among them.

One point per session with a scored report, in the order of the session's first record;
its score is the mean of its reports' scores (each report once), clamped to 0..1, and
score 1 counts as accepted. A release's mark sits between the sessions before and after
the moment it went live. For the page's release the curve is split there: how many
sessions came before and after and what share was accepted, and how many sessions after
it the first run of three accepted ones began ("sessions to adaptation").

Read through one store query (``Store.session_scores``, no request bodies) and bounded
to the newest ``LIMIT`` sessions, so a page of a busy scenario stays cheap.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reef_cli.core.releases import Release
from reef_cli.core.store.base import Store

LIMIT = 500  # sessions on the curve: the newest ones
RUN = 3  # accepted sessions in a row that count as adapted; the running mean's window


@dataclass(frozen=True)
class Point:
    index: int  # 1-based place on the curve
    session: str  # the session's key ("session:<id>" or "record:<receipt>")
    at: str  # its first record's time
    score: float  # the mean reported score, clamped to 0..1
    reports: int

    @property
    def accepted(self) -> bool:
        return self.score >= 1.0


@dataclass(frozen=True)
class ReleaseMark:
    number: int
    at: str  # when it went live
    after: int  # how many points precede it: its line is drawn at ``after + 0.5``
    this: bool  # the page's own release


@dataclass(frozen=True)
class Side:
    """The sessions on one side of the page's release."""

    sessions: int
    accepted: int

    @property
    def share(self) -> float | None:
        return self.accepted / self.sessions if self.sessions else None


@dataclass(frozen=True)
class FeedbackCurve:
    points: list[Point]
    releases: list[ReleaseMark]
    this_release: int
    live_at: str | None  # when the page's release went live; None: it never did
    live_as: int | None  # the release that put it live (itself, or the promote of a pending one)
    before: Side
    after: Side
    adaptation: int | None  # 1-based, among the sessions after it; None: not yet
    limited: bool  # the newest ``LIMIT`` sessions only: older ones were left out


def _when(text: str) -> datetime:
    """A stored time as an aware datetime (records and releases may spell UTC
    differently); an unreadable one sorts first."""
    try:
        found = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return datetime.min.replace(tzinfo=UTC)
    return found if found.tzinfo else found.replace(tzinfo=UTC)


def went_live(releases: list[Release], number: int) -> tuple[list[tuple[int, str]], int | None]:
    """``([(release, when it went live)], the release that put ``number`` live)``: a live
    release goes live when it is created; a pending one only through a promote."""
    lives = [(r.number, r.meta.created_at) for r in releases if r.meta.status == "live"]
    this = next((r for r in releases if r.number == number), None)
    if this is None or this.meta.status == "live":
        return lives, number if this is not None else None
    promoters = [
        r.number
        for r in releases
        if r.meta.source == "promote" and r.meta.points_to == number and r.meta.status == "live"
    ]
    return lives, min(promoters) if promoters else None


def running_mean(scores: list[float], window: int = RUN) -> list[float]:
    """Each score's mean with the ones before it, ``window`` at most."""
    return [
        sum(scores[max(0, i - window + 1) : i + 1]) / len(scores[max(0, i - window + 1) : i + 1])
        for i in range(len(scores))
    ]


def adaptation(points: list[Point], run: int = RUN) -> int | None:
    """The 1-based place of the first of ``run`` accepted points in a row."""
    for start in range(len(points) - run + 1):
        if all(p.accepted for p in points[start : start + run]):
            return start + 1
    return None


def build(
    rows: list[dict[str, Any]],
    lives: list[tuple[int, str]],
    this_release: int,
    live_as: int | None,
    *,
    limit: int = LIMIT,
) -> FeedbackCurve:
    """The curve of ``rows`` (``Store.session_scores``, oldest first) with ``lives``
    (``went_live``) marked on it, split where ``live_as`` went live."""
    ordered = sorted(rows, key=lambda r: (_when(str(r["first_at"])), str(r["session"])))
    points = [
        Point(
            index=i,
            session=str(row["session"]),
            at=str(row["first_at"]),
            score=min(1.0, max(0.0, float(row["score"]))),
            reports=int(row.get("reports") or 0),
        )
        for i, row in enumerate(ordered, start=1)
    ]
    times = [_when(p.at) for p in points]
    marks = [
        ReleaseMark(n, at, bisect_left(times, _when(at)), n in (this_release, live_as))
        for n, at in sorted(lives, key=lambda life: (_when(life[1]), life[0]))
    ]
    # Releases that went live before the first point all sit at its left edge: the newest
    # of them is the one that served it; the page's own release is always kept.
    first_shown = max((i for i, m in enumerate(marks) if m.after == 0), default=0)
    marks = [m for i, m in enumerate(marks) if i >= first_shown or m.this]
    live_at = next((at for n, at in lives if n == live_as), None)
    if live_at is None:
        before, after = points, []
    else:
        split = bisect_left(times, _when(live_at))
        before, after = points[:split], points[split:]
    return FeedbackCurve(
        points=points,
        releases=marks,
        this_release=this_release,
        live_at=live_at,
        live_as=live_as,
        before=Side(len(before), sum(p.accepted for p in before)),
        after=Side(len(after), sum(p.accepted for p in after)),
        adaptation=adaptation(after) if live_at is not None else None,
        limited=len(rows) >= limit,
    )


def feedback_curve(
    store: Store, scenario: str, releases: list[Release], number: int, *, limit: int = LIMIT
) -> FeedbackCurve:
    """Release ``number``'s curve over ``scenario``'s newest ``limit`` reported sessions."""
    lives, live_as = went_live(releases, number)
    rows = store.session_scores(scenario, limit=limit)
    return build(rows, lives, number, live_as, limit=limit)

"""The records a score-driven recipe looks at, and what reports say of them.

SAO turns a record's score into an advantage; SFT keeps the records whose score reaches
its threshold. Both start here, so the rules are written once: which records may train
(``eligibility.eligible``) and which report counts (the latest scored one that names the
record: a person who changes their mind is heard).
"""

from __future__ import annotations

from dataclasses import dataclass

from reef_cli.core.records import Record
from reef_cli.core.reports import list_reports
from reef_cli.core.store import Store
from reefd.weight_recipes.eligibility import Counts, eligible, settled


def latest_scores(store: Store, scenario: str) -> dict[str, float]:
    """Record id -> the score of the latest report that names it and has a score."""
    out: dict[str, float] = {}
    for report in list_reports(store, scenario=scenario):
        if report.score is None:
            continue
        for ref in report.references:
            out[ref] = float(report.score)
    return out


@dataclass
class Candidates:
    records: list[Record]  # eligible turns, oldest first
    scores: dict[str, float]  # record id -> its latest score (any record of the scenario)
    counts: Counts  # what became of the rest (``used``: the eligible ones, for now)
    dropped: list[str]  # settled records that can never train: consumed at any time


def candidates(
    store: Store,
    scenario: str,
    current_version: str,
    consumed: set[str],
    max_staleness: int | None,
) -> Candidates:
    """The scenario's turns not yet consumed that may train ``current_version``, with the
    scores reports gave them."""
    fresh = [r for r in store.iter(scenario=scenario) if r.is_turn and r.id not in consumed]
    kept, counts = eligible(fresh, current_version, max_staleness)
    kept_ids = {r.id for r in kept}
    dropped = [r.id for r in fresh if settled(r) and r.id not in kept_ids]
    return Candidates(kept, latest_scores(store, scenario), counts, dropped)

"""The console's pages: each reads what it shows (the chain, the store, the jobs) for one
grant and returns its title and body. Nothing here writes; the routes do, after the
grant and the CSRF token are checked."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from reef_cli.core import jobs, proposals, scenarios
from reef_cli.core.errors import ExtraMissing, OptionInvalid
from reef_cli.core.records import Record
from reef_cli.core.tokens import Grant
from reef_cli.server.api_status import scenario_status
from reef_cli.server.console.html import action_form, badge, e, section, table, url

RECORDS_SHOWN = 50  # a search lists this many records at most
RECORDS_SCANNED = 500  # a score filter reads this many of the newest matches
BODY_SHOWN = 64 * 1024  # a record's request or response is cut here on its page
JOBS_SHOWN = 100


@dataclass
class Page:
    title: str
    body: str
    current: str  # the navigation entry it belongs to


def _when(iso: str | None) -> str:
    return e((iso or "")[:19].replace("T", " "))


def _release_link(scenario: str, number: int | None) -> str:
    if number is None:
        return '<span class="note">none</span>'
    return f'<a href="{e(url("scenarios", scenario, "releases", number))}">r{number}</a>'


def _job_link(job: jobs.Job) -> str:
    return f'<a href="{e(url("jobs", job.id))}">{e(job.id)}</a>'


def _visible(grant: Grant) -> list[scenarios.Scenario]:
    return [s for s in scenarios.list_all() if grant.allows(s.name)]


# ------------------------------------------------------------------ scenarios


def overview(state: Any, grant: Grant) -> Page:
    """Every scenario the grant may see: what it serves and what its loop is doing."""
    rows = []
    for found in _visible(grant):
        status = scenario_status(found, state.learning)
        learning = status["learning"]
        loop = "off"
        if learning["enabled"]:
            last = learning["last_run"] or {}
            loop = "on" + (f" · last run {last.get('outcome', '')}" if last else "")
        waits = (learning.get("next_trigger") or {}).get("waits_for")
        rows.append(
            [
                f'<a href="{e(url("scenarios", found.name))}">{e(found.name)}</a>',
                e(found.description),
                _release_link(found.name, status["served"]),
                _release_link(found.name, status["latest"]),
                e(found.training_mode),
                e(loop) + (f' <span class="note">waits for {e(waits)}</span>' if waits else ""),
                str(len(proposals.pending(found))),
                str(len(jobs.active(found.name))),
            ]
        )
    head = ["scenario", "description", "served", "latest", "training", "live loop",
            "proposals", "active jobs"]  # fmt: skip
    body = section(
        "scenarios", "Scenarios", table(head, rows, "No scenario yet: `reef scenario create`.")
    )
    return Page("Scenarios", body, "scenarios")


def _curve(state: Any, found: scenarios.Scenario, releases: list[Any], number: int) -> str:
    """The scenario's reported sessions over time, with the releases that went live."""
    from reef_cli.core.feedback_curve import feedback_curve
    from reef_cli.core.plots import feedback_plot

    curve = feedback_curve(state.store, found.name, releases, number)
    if not curve.points:
        return (
            '<p class="note">No reported session yet: a session shows here once a report '
            "(POST /reef/report, or reef report) gives it a score.</p>"
        )
    try:
        png = feedback_plot(curve.points, curve.releases, number)
    except ExtraMissing as exc:
        return f'<p class="note">No plot: {e(exc.one_line())}</p>'
    data = base64.b64encode(png).decode("ascii")
    alt = "each reported session's score over time, with a line where each release went live"
    return f'<img class="plot" alt="{alt}" src="data:image/png;base64,{data}">'


def _by_release(state: Any, found: scenarios.Scenario) -> str:
    rows = [
        [
            _release_link(found.name, row["release"]),
            str(row["records"]),
            str(row["reports"]),
            "-" if row["score"] is None else f"{row['score']:.2f}",
        ]
        for row in state.store.release_scores(found.name)
    ]
    return table(
        ["credited to", "records", "scored reports", "mean score"], rows, "No records yet."
    )


def _proposal_actions(name: str, number: int, csrf: str) -> str:
    return action_form(
        url("scenarios", name, "promote"), csrf, f"Promote r{number}", {"release": number}
    ) + action_form(
        url("scenarios", name, "reject"), csrf, f"Reject r{number}", {"release": number}, "danger"
    )


def _proposal_rows(found: scenarios.Scenario, csrf: str, with_scenario: bool) -> list[list[str]]:
    rows = []
    for proposal in proposals.pending(found):
        release = proposal.release
        reason = release.meta.reason.splitlines()[0] if release.meta.reason else ""
        row = (
            [f'<a href="{e(url("scenarios", found.name))}">{e(found.name)}</a>']
            if with_scenario
            else []
        )
        row += [
            _release_link(found.name, release.number),
            e(proposal.held_for),
            e(reason),
            _when(release.meta.created_at),
            _proposal_actions(found.name, release.number, csrf),
        ]
        rows.append(row)
    return rows


PROPOSAL_HEAD = ["release", "held for", "reason", "created", "decide"]


def _jobs_table(found: list[jobs.Job], with_scenario: bool = True) -> str:
    rows = []
    for job in found:
        row = [_job_link(job)]
        if with_scenario:
            row.append(f'<a href="{e(url("scenarios", job.scenario))}">{e(job.scenario)}</a>')
        row += [
            e(job.flow if job.flow != "evolve" else job.recipe),
            badge(job.state),
            e(job.progress.get("message", "")),
            _release_link(job.scenario, job.release),
            _when(job.created_at),
        ]
        rows.append(row)
    head = ["job", *(["scenario"] if with_scenario else []), "recipe", "state", "progress",
            "release", "created"]  # fmt: skip
    return table(head, rows, "No jobs yet.")


def scenario(state: Any, name: str, csrf: str) -> Page:
    """One scenario: what it serves, the feedback over time, its chain, proposals, jobs."""
    found = scenarios.get(name)
    chain = found.chain()
    releases = chain.releases()
    served, latest = chain.served(), chain.latest()
    states = proposals.states(found, releases)
    facts = [
        ("served", _release_link(name, served.number if served else None)),
        ("latest", _release_link(name, latest.number if latest else None)),
        ("training mode", e(found.training_mode)),
        ("description", e(found.description) or '<span class="note">none</span>'),
    ]
    summary = "<dl>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>"
    chain_rows = []
    for release in reversed(releases):
        meta = release.meta
        source = meta.source + (f" → r{meta.points_to}" if meta.points_to else "")
        chain_rows.append(
            [
                _release_link(name, release.number),
                badge(proposals.shown_status(release, states)),
                e(source),
                e(meta.gate.get("verdict", "")),
                _when(meta.created_at),
                e(meta.reason.splitlines()[0] if meta.reason else ""),
            ]
        )
    curve = (
        _curve(state, found, releases, served.number)
        if served is not None
        else '<p class="note">No release is served yet.</p>'
    )
    body = (
        section("summary", "Served now", summary)
        + section("feedback", "Feedback over time", curve + _by_release(state, found))
        + section(
            "proposals",
            "Proposals waiting for review",
            table(PROPOSAL_HEAD, _proposal_rows(found, csrf, False), "Nothing waits for review."),
        )
        + section(
            "chain",
            "Release chain (each release's page has its diff)",
            table(
                ["release", "status", "source", "gate", "created", "reason"],
                chain_rows,
                "No releases yet.",
            ),
        )
        + section(
            "jobs",
            "Jobs",
            _jobs_table([j for j in jobs.recent(JOBS_SHOWN) if j.scenario == name], False),
        )
    )
    return Page(name, body, "scenarios")


# ------------------------------------------------------------------ inbox and jobs


def inbox(grant: Grant, csrf: str) -> Page:
    """Every pending proposal the grant may decide, newest first per scenario."""
    rows: list[list[str]] = []
    for found in _visible(grant):
        rows += _proposal_rows(found, csrf, True)
    body = section(
        "inbox",
        "Proposals",
        table(["scenario", *PROPOSAL_HEAD], rows, "Nothing waits for review."),
    )
    return Page("Inbox", body, "inbox")


def job_list(grant: Grant) -> Page:
    shown = [j for j in jobs.recent(JOBS_SHOWN) if grant.allows(j.scenario)]
    return Page(
        "Jobs", section("jobs", f"The newest {JOBS_SHOWN} jobs", _jobs_table(shown)), "jobs"
    )


def job(found: jobs.Job) -> Page:
    """A job with its progress (followed live by console.js) and, once done, its outcome."""
    fraction = found.progress.get("fraction")
    value = f' value="{float(fraction):.3f}"' if isinstance(fraction, (int, float)) else ""
    live = (
        f'<div class="progress" data-follow="{e(url("jobs", found.id, "progress"))}">'
        f'<span data-state class="badge {e(found.state)}">{e(found.state)}</span> '
        f'<progress max="1"{value}></progress> '
        f"<span data-message>{e(found.progress.get('message', ''))}</span></div>"
        if found.state in ("queued", "running")
        else f"<p>{badge(found.state)} {e(found.message or found.progress.get('message', ''))}</p>"
    )
    facts = [
        ("scenario", f'<a href="{e(url("scenarios", found.scenario))}">{e(found.scenario)}</a>'),
        ("recipe", e(found.recipe)),
        ("flow", e(found.flow)),
        ("origin", e(found.origin)),
        ("publish", e(found.publish)),
        ("ask", e(found.ask or "")),
        ("release", _release_link(found.scenario, found.release)),
        ("created", _when(found.created_at)),
        ("updated", _when(found.updated_at)),
    ]
    summary = "<dl>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>"
    body = section("progress", "Progress", live) + section("details", "Job", summary)
    if found.outcome:
        shown = json.dumps(found.outcome, indent=2, default=str)[:BODY_SHOWN]
        body += section("outcome", "Outcome", f"<pre>{e(shown)}</pre>")
    return Page(found.id, body, "jobs")


# ------------------------------------------------------------------ records


@dataclass
class RecordQuery:
    scenario: str = ""
    receipt: str = ""
    session: str = ""
    tag: str = ""  # name=value
    min_score: float | None = None
    max_score: float | None = None

    def tags(self) -> dict[str, str] | None:
        if not self.tag:
            return None
        name, sep, value = self.tag.partition("=")
        if not sep or not name.strip():
            raise QueryInvalid("tag: write it as name=value", "for example: team=search")
        return {name.strip().lower(): value.strip()}


class QueryInvalid(OptionInvalid):
    """A records search the console cannot run (HTTP 400)."""

    http_status = 400


def _score(store: Any, record: Record) -> float | None:
    scores = [r.score for r in store.reports(record_id=record.id) if r.score is not None]
    return sum(scores) / len(scores) if scores else None


def find_records(store: Any, grant: Grant, query: RecordQuery) -> list[tuple[Record, float | None]]:
    """Records the grant may see that match ``query``, newest first, with their mean
    reported score. A receipt is looked up directly; a score filter reads at most the
    newest RECORDS_SCANNED other matches."""
    from reef_cli.core.records import RecordNotFound

    if query.receipt:
        try:
            record = store.get(query.receipt)
        except RecordNotFound:
            return []
        if not grant.allows(record.scenario):
            return []  # as for an unknown receipt: no existence oracle
        found = [record]
    else:
        if query.scenario and not grant.allows(query.scenario):
            return []
        names = [query.scenario] if query.scenario else [s.name for s in _visible(grant)]
        scored = query.min_score is not None or query.max_score is not None
        limit = RECORDS_SCANNED if scored else RECORDS_SHOWN
        found = []
        for name in names:
            found += store.list(
                scenario=name, session_id=query.session or None, tags=query.tags(), limit=limit
            )
        found.sort(key=lambda r: r.created_at, reverse=True)
    out = []
    for record in found:
        score = _score(store, record)
        if query.min_score is not None and (score is None or score < query.min_score):
            continue
        if query.max_score is not None and (score is None or score > query.max_score):
            continue
        out.append((record, score))
        if len(out) >= RECORDS_SHOWN:
            break
    return out


def _search_form(grant: Grant, query: RecordQuery) -> str:
    options = '<option value="">every scenario</option>' + "".join(
        f'<option value="{e(s.name)}"{" selected" if s.name == query.scenario else ""}>'
        f"{e(s.name)}</option>"
        for s in _visible(grant)
    )

    def field(name: str, label: str, value: Any, kind: str = "text", extra: str = "") -> str:
        shown = "" if value is None else value
        return (
            f'<label>{e(label)}<input type="{kind}" name="{name}" value="{e(shown)}"{extra}>'
            "</label>"
        )

    step = ' step="0.05" min="0" max="1"'
    return (
        f'<form class="search" method="get" action="{e(url("records"))}" role="search">'
        f'<label>scenario<select name="scenario">{options}</select></label>'
        + field("receipt", "receipt", query.receipt)
        + field("session", "session", query.session)
        + field("tag", "tag (name=value)", query.tag)
        + field("min_score", "score at least", query.min_score, "number", step)
        + field("max_score", "score at most", query.max_score, "number", step)
        + '<button type="submit">Search</button></form>'
    )


def records(state: Any, grant: Grant, query: RecordQuery) -> Page:
    found = find_records(state.store, grant, query)
    rows = [
        [
            f'<a href="{e(url("records", r.id))}">{e(r.id)}</a>',
            _when(r.created_at),
            e(r.scenario),
            _release_link(r.scenario, r.release_id),
            e(r.session_id or ""),
            e(r.model or ""),
            e(r.status),
            "-" if score is None else f"{score:.2f}",
            e(", ".join(f"{k}={v}" for k, v in sorted((r.tags or {}).items()))),
        ]
        for r, score in found
    ]
    head = ["receipt", "created", "scenario", "release", "session", "model", "status",
            "score", "tags"]  # fmt: skip
    body = section("search", "Search", _search_form(grant, query)) + section(
        "results",
        f"Records ({len(rows)} shown, newest first)",
        table(head, rows, "No record matches."),
    )
    return Page("Records", body, "records")


def record(store: Any, record_id: str) -> tuple[Page, str]:
    """A record's page, and its scenario (the caller authorises it before showing)."""
    found = store.get(record_id)
    score = _score(store, found)
    facts = [
        ("scenario", e(found.scenario)),
        ("release", _release_link(found.scenario, found.release_id)),
        ("session", e(found.session_id or "")),
        ("dialects", e(f"{found.client_dialect} → {found.upstream_dialect}")),
        ("model", e(found.model or "")),
        ("status", e(found.status)),
        ("state", e(found.state)),
        ("latency", e(f"{found.latency_ms:.0f} ms" if found.latency_ms is not None else "")),
        ("score", "-" if score is None else f"{score:.2f}"),
        ("tags", e(json.dumps(found.tags or {}))),
        ("created", _when(found.created_at)),
    ]
    summary = "<dl>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>"

    def body_of(value: Any) -> str:
        text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
        cut = f"\n… ({len(text) - BODY_SHOWN} more characters)" if len(text) > BODY_SHOWN else ""
        return f"<pre>{e(text[:BODY_SHOWN] + cut)}</pre>"

    body = (
        section("record", "Record", summary)
        + section("request", "Request", body_of(found.request))
        + section("response", "Response", body_of(found.response))
    )
    return Page(found.id, body, "records"), found.scenario

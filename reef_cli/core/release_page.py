"""A release as one self-contained HTML page: why it exists, what changed, the verdict,
the evaluation (with its plot), the feedback from use around it (the accept curve), the
trial and where it sits in the chain.

For `reef harness page N` and `GET /reef/harness/releases/{n}/page`. The page needs
nothing outside itself: CSS inline, the plots inline ``data:`` PNGs, no script, no link
to anywhere but its own sections; a Content-Security-Policy says so to the browser.
Everything a release holds was written by a model or a person and is escaped.
"""

from __future__ import annotations

import base64
import json
from html import escape
from typing import TYPE_CHECKING, Any

from reef_cli.core import proposals, scenarios
from reef_cli.core.diff import FileDiff, diff_trees, line_kind
from reef_cli.core.errors import ExtraMissing, ReefError
from reef_cli.core.releases import Release

if TYPE_CHECKING:
    from reef_cli.core.feedback_curve import FeedbackCurve, Side
    from reef_cli.core.store.base import Store

SECTIONS = ("why", "changes", "verdict", "evaluation", "feedback", "trial", "chain")
AROUND = 3  # releases shown either side of this one in the chain section
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

CSS = """
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1f2328;
 background:#f6f8fa;margin:0}
main{max-width:1100px;margin:0 auto;padding:24px}
header h1{margin:0 0 4px;font-size:26px}
nav{margin:12px 0 20px}
nav a{margin-right:14px;color:#0969da;text-decoration:none}
section{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:16px 20px;
 margin:0 0 18px}
h2{margin:0 0 12px;font-size:19px;border-bottom:1px solid #eaeef2;padding-bottom:6px}
h3{font-size:15px;margin:16px 0 6px}
table{border-collapse:collapse;width:100%;margin:6px 0}
th,td{text-align:left;vertical-align:top;padding:5px 8px;border-bottom:1px solid #eaeef2}
th{background:#f6f8fa;font-weight:600}
dl{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px;margin:0}
dt{font-weight:600;color:#57606a}
dd{margin:0;white-space:pre-wrap;word-break:break-word}
pre{background:#f6f8fa;border:1px solid #eaeef2;border-radius:6px;padding:10px;
 overflow-x:auto;font:13px/1.45 ui-monospace,SFMono-Regular,Menlo,monospace;margin:6px 0}
pre.diff span{display:block;white-space:pre}
.add{background:#dafbe1;color:#116329}.del{background:#ffebe9;color:#82071e}
.hunk{color:#0550ae;background:#ddf4ff}.meta{font-weight:600}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;
 font-weight:600;color:#fff;background:#6e7781}
.passed,.live,.promoted{background:#1a7f37}.failed,.blocked,.rejected{background:#cf222e}
.pending{background:#9a6700}.invalid{background:#8250df}
.note{color:#57606a}
ul.findings{margin:4px 0 0;padding-left:20px;color:#57606a;font-size:13px}
tr.current td{background:#fff8c5;font-weight:600}
img.plot{max-width:100%;border:1px solid #eaeef2;border-radius:6px}
"""


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _badge(status: Any) -> str:
    text = _e(status or "-")
    return f'<span class="badge {text}">{text}</span>'


def _dl(rows: list[tuple[str, Any]]) -> str:
    items = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in rows if v not in (None, ""))
    return f"<dl>{items}</dl>" if items else '<p class="note">Nothing recorded.</p>'


def _section(name: str, title: str, body: str) -> str:
    return f'<section id="{name}"><h2>{_e(title)}</h2>{body}</section>'


def _ci(values: Any) -> str:
    if not isinstance(values, list | tuple) or len(values) != 2:
        return ""
    return f" [{float(values[0]):.3f}, {float(values[1]):.3f}]"


def _num(value: Any, signed: bool = False) -> str:
    if not isinstance(value, int | float):
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def evaluation_rows(evaluation: dict[str, Any]) -> list[tuple[str, str]]:
    """The gate evaluation's numbers as (label, text) rows: what `reef harness show` and
    the page print, so both read the same."""
    numbers = evaluation.get("numbers") or {}
    rows: list[tuple[str, str]] = [
        ("split", str(evaluation.get("split") or "test")),
        ("status", str(evaluation.get("status", "-"))),
    ]
    if numbers.get("candidate_mean") is not None:
        rows += [
            ("tasks", f"{numbers.get('tasks', '-')} x {numbers.get('repeats', '-')} repeat(s)"),
            (
                "candidate",
                _num(numbers["candidate_mean"]) + _ci(numbers.get("candidate_ci95")),
            ),
            (
                "incumbent",
                _num(numbers.get("incumbent_mean")) + _ci(numbers.get("incumbent_ci95")),
            ),
            ("Δ mean", _num(numbers.get("mean_diff"), True) + _ci(numbers.get("diff_ci95"))),
        ]
    if "wins" in numbers:
        rows.append(
            (
                "W/L/T",
                f"{numbers['wins']}/{numbers['losses']}/{numbers['ties']}, "
                f"sign test p={numbers.get('p')}",
            )
        )
    if "ci_lower" in numbers:
        rows.append(("bootstrap lower bound", _num(numbers["ci_lower"], True)))
    lenient = numbers.get("lenient") or {}
    if lenient:
        rows.append(
            (
                "lenient",
                f"candidate {_num(lenient.get('candidate_mean'))}, incumbent "
                f"{_num(lenient.get('incumbent_mean'))}, Δ {_num(lenient.get('mean_diff'), True)}"
                f"{_ci(lenient.get('ci95'))} over {lenient.get('tasks', '-')} task(s)",
            )
        )
    if numbers.get("failed_tasks"):
        rows.append(("tasks with no valid score", ", ".join(map(str, numbers["failed_tasks"]))))
    return rows


def _why(meta: dict[str, Any]) -> str:
    source = meta.get("source", "")
    if meta.get("points_to"):
        source += f" (content of r{meta['points_to']})"
    rows: list[tuple[str, Any]] = [
        ("reason", meta.get("reason")),
        ("ask", meta.get("ask")),
        ("recipe", meta.get("recipe")),
        ("source", source),
        ("parent", f"r{meta['parent']}" if meta.get("parent") else "-"),
        ("created", meta.get("created_at")),
        ("content hash", meta.get("content_hash")),
        ("model", meta.get("model")),
    ]
    judge = meta.get("judge")
    if isinstance(judge, dict):
        rows.append(("judge", f"{judge.get('model')} (threshold {judge.get('threshold')})"))
    tasks = meta.get("tasks")
    if isinstance(tasks, dict):
        rows.append(
            (
                "task set",
                f"{tasks.get('name') or '-'}: splits {tasks.get('splits')}, "
                f"{tasks.get('repeats')} repeat(s), runner {tasks.get('runner')}",
            )
        )
    body = _dl(rows)
    changes = [c for c in meta.get("changes") or [] if isinstance(c, dict)]
    if changes:
        body += "<h3>Changes the recipe made</h3><table><tr><th>kind</th><th>name</th>"
        body += "<th>path</th><th>summary</th><th>why</th></tr>"
        for c in changes:
            cells = (c.get("kind"), c.get("name"), c.get("path"), c.get("summary"), c.get("why"))
            body += "<tr>" + "".join(f"<td>{_e(v)}</td>" for v in cells) + "</tr>"
        body += "</table>"
    shown = json.dumps(meta, indent=2, sort_keys=True, default=str)
    body += f"<details><summary>All metadata (RELEASE.json)</summary><pre>{_e(shown)}</pre>"
    body += "</details>"
    return body


def _diff_block(change: FileDiff) -> str:
    lines = []
    for line in change.diff.splitlines():
        lines.append(f'<span class="{line_kind(line)}">{_e(line) or " "}</span>')
    head = f"{_e(change.status)}: {_e(change.path)} (+{change.added} −{change.removed})"
    return f'<h3>{head}</h3><pre class="diff">{"".join(lines)}</pre>'


def _changes(previous: Release | None, old: dict[str, str], new: dict[str, str], tag: str) -> str:
    if previous is None:
        intro = "The first release: every file is new."
    else:
        intro = f"Compared with {previous.tag}, the release before it."
    label = previous.tag if previous else "empty"
    found = diff_trees(old, new, label, tag)
    if not found:
        return f'<p class="note">{_e(intro)} No file changed.</p>'
    added = sum(c.added for c in found)
    removed = sum(c.removed for c in found)
    summary = f"{intro} {len(found)} file(s) changed, +{added} −{removed} line(s)."
    return f"<p>{_e(summary)}</p>" + "".join(_diff_block(c) for c in found)


def _verdict(gate: dict[str, Any]) -> str:
    checks = [c for c in gate.get("checks") or [] if isinstance(c, dict)]
    body = f"<p>Gate verdict: {_badge(gate.get('verdict'))} ({len(checks)} check(s))</p>"
    if not checks:
        return body
    body += "<table><tr><th>status</th><th>check</th><th>detail and numbers</th></tr>"
    for check in checks:
        findings = "".join(f"<li>{_e(f)}</li>" for f in check.get("findings") or [])
        listed = f'<ul class="findings">{findings}</ul>' if findings else ""
        body += (
            f"<tr><td>{_badge(check.get('status'))}</td><td>{_e(check.get('name'))}</td>"
            f"<td>{_e(check.get('detail'))}{listed}</td></tr>"
        )
    return body + "</table>"


def _evaluation(evaluation: Any) -> str:
    if not isinstance(evaluation, dict):
        return (
            '<p class="note">No evaluation: this release was not scored on a task set '
            "(it was published without one, or by hand).</p>"
        )
    body = f"<p>{_badge(evaluation.get('status'))} {_e(evaluation.get('reason'))}</p>"
    rows = evaluation_rows(evaluation)
    body += "<table>" + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    body += "</table>"
    numbers = evaluation.get("numbers") or {}
    if numbers.get("candidate_mean") is None:
        return body + '<p class="note">No plot: the evaluation holds no means.</p>'
    from reef_cli.core.plots import verdict_plot

    try:
        png = verdict_plot(numbers)
    except ExtraMissing as exc:
        return body + f'<p class="note">No plot: {_e(exc.one_line())}</p>'
    data = base64.b64encode(png).decode("ascii")
    alt = "candidate vs incumbent mean scores with 95% intervals, and per-task differences"
    return body + f'<img class="plot" alt="{alt}" src="data:image/png;base64,{data}">'


def _side(side: Side) -> str:
    if side.share is None:
        return "none"
    return f"{side.accepted} of {side.sessions} accepted ({side.share:.0%})"


def _feedback_table(curve: FeedbackCurve) -> str:
    tag = f"r{curve.this_release}"
    if curve.live_at is None:
        return (
            f'<p class="note">{_e(tag)} never went live (it was published pending and '
            "not promoted): no sessions before or after it.</p>"
        )
    via = f" (through r{curve.live_as})" if curve.live_as != curve.this_release else ""
    if curve.adaptation is not None:
        adapted = f"{curve.adaptation} (the first of three accepted sessions in a row)"
    else:
        adapted = "not yet (no three accepted sessions in a row after it)"
    rows = [
        (f"went live{via}", curve.live_at),
        (f"sessions before {tag}", _side(curve.before)),
        (f"sessions after {tag}", _side(curve.after)),
        ("sessions to adaptation", adapted),
    ]
    cells = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    return f"<table>{cells}</table>"


def _feedback(store: Store | None, name: str, releases: list[Release], number: int) -> str:
    """The scenario's reported sessions around this release: the curve and the split."""
    from reef_cli.core.feedback_curve import LIMIT, feedback_curve

    try:
        if store is not None:
            curve = feedback_curve(store, name, releases, number)
        else:
            from reef_cli.core.store import open_store

            opened = open_store()
            try:
                curve = feedback_curve(opened, name, releases, number)
            finally:
                opened.close()
    except ReefError as exc:
        return f'<p class="note">No feedback shown: {_e(exc.one_line())}</p>'
    if not curve.points:
        return (
            f'<p class="note">There are no reported sessions yet in {_e(name)}: a session '
            "shows here once a report (POST /reef/report, or reef report) gives it a "
            "score.</p>"
        )
    shown = f"the newest {LIMIT} " if curve.limited else ""
    body = (
        f"<p>Scores of {shown}{len(curve.points)} reported session(s) of {_e(name)}, in the "
        "order each began (a session's score is the mean of its reports; 1 = accepted), "
        "and the releases that went live among them.</p>"
    )
    from reef_cli.core.plots import feedback_plot

    try:
        png = feedback_plot(curve.points, curve.releases, number)
    except ExtraMissing as exc:
        body += f'<p class="note">No plot: {_e(exc.one_line())}</p>'
    else:
        data = base64.b64encode(png).decode("ascii")
        alt = "each reported session's score over time, with a line where each release went live"
        body += f'<img class="plot" alt="{alt}" src="data:image/png;base64,{data}">'
    return body + _feedback_table(curve)


def _trial(trial: Any) -> str:
    if not isinstance(trial, dict):
        return (
            '<p class="note">No trial: the agent was not run with this release '
            "(a hand publish, a rollback or promote, or a recipe without trials).</p>"
        )
    receipts = trial.get("receipts") or []
    rows: list[tuple[str, Any]] = [
        ("agent", " ".join(str(p) for p in (trial.get("agent"), trial.get("agent_version")) if p)),
        ("probe", trial.get("probe")),
        ("sandbox", trial.get("sandbox")),
        ("exit status", trial.get("returncode")),
        ("timed out", trial.get("timed_out")),
        ("seconds", trial.get("seconds")),
        ("change loaded", trial.get("loaded")),
        ("requests recorded", trial.get("requests")),
        ("receipts", ", ".join(map(str, receipts))),
        ("stderr (last line)", trial.get("stderr_tail")),
    ]
    body = _dl(rows)
    found = [f for f in trial.get("found") or [] if isinstance(f, dict)]
    if found:
        body += "<h3>Where the change was found in the model's requests</h3><table>"
        body += "<tr><th>text</th><th>receipt</th><th>in</th></tr>"
        for f in found:
            body += (
                f"<tr><td>{_e(f.get('text'))}</td><td>{_e(f.get('receipt'))}</td>"
                f"<td>{_e(f.get('in'))}</td></tr>"
            )
        body += "</table>"
    answer = trial.get("answer_excerpt") or trial.get("answer")
    if answer:
        body += f"<h3>The agent's answer (excerpt)</h3><pre>{_e(answer)}</pre>"
    return body


def _chain(
    releases: list[Release],
    current: Release,
    served: Release | None,
    name: str,
    states: dict[int, str],
) -> str:
    from reef_cli.core.installs import installed_release

    number = current.number
    installed = installed_release(name)
    facts = [
        ("previous", f"r{number - 1}" if number > 1 else "none (the first release)"),
        ("next", f"r{number + 1}" if number < len(releases) else "none (the latest release)"),
        ("served", served.tag if served else "none (no live release)"),
        ("latest", releases[-1].tag),
        ("installed", f"r{installed}" if installed else "none recorded here"),
    ]
    body = _dl(facts)
    shown = releases[max(0, number - 1 - AROUND) : number + AROUND]
    body += "<table><tr><th>release</th><th>status</th><th>source</th><th>gate</th>"
    body += "<th>created</th><th>reason</th></tr>"
    for release in shown:
        meta = release.meta
        marks = [
            mark
            for mark, on in (
                ("this page", release.number == number),
                ("served", served is not None and release.number == served.number),
            )
            if on
        ]
        label = release.tag + (f" ({', '.join(marks)})" if marks else "")
        source = meta.source + (f" → r{meta.points_to}" if meta.points_to else "")
        reason = meta.reason.splitlines()[0] if meta.reason else ""
        cls = ' class="current"' if release.number == number else ""
        status = proposals.shown_status(release, states)
        body += (
            f"<tr{cls}><td>{_e(label)}</td><td>{_badge(status)}</td><td>{_e(source)}</td>"
            f"<td>{_e(meta.gate.get('verdict', ''))}</td>"
            f"<td>{_e(meta.created_at[:19].replace('T', ' '))}</td><td>{_e(reason)}</td></tr>"
        )
    return body + "</table>"


def render_page(
    scenario: scenarios.Scenario | str,
    number: int,
    *,
    store: Store | None = None,
    top: str = "",
) -> str:
    """The page of release ``number`` of ``scenario`` (``ReleaseNotFound`` if none); the
    feedback section reads ``store`` (None: it opens the configured one). ``top``: HTML
    put first in the body (the console's navigation), trusted as given."""
    found_in = scenario if isinstance(scenario, scenarios.Scenario) else scenarios.get(scenario)
    chain = found_in.chain()
    release = chain.get(number)
    releases = chain.releases()
    served = chain.served()
    states = proposals.states(found_in, releases)  # a pending release's real state
    previous = releases[number - 2] if number > 1 else None
    new = chain.files(release)
    old = chain.files(previous) if previous else {}
    meta = release.meta.model_dump()
    name = found_in.name
    title = f"{name} {release.tag}"
    reason = meta.get("reason") or ""
    headline = reason.splitlines()[0] if reason.strip() else meta.get("source", "")
    parts = [
        _section("why", "Why this release exists", _why(meta)),
        _section("changes", "What changed", _changes(previous, old, new, release.tag)),
        _section("verdict", "The gate's verdict", _verdict(meta.get("gate") or {})),
        _section("evaluation", "Evaluation", _evaluation(meta.get("evaluation"))),
        _section("feedback", "Feedback from use", _feedback(store, name, releases, number)),
        _section("trial", "Trial", _trial(meta.get("trial"))),
        _section("chain", "In the release chain", _chain(releases, release, served, name, states)),
    ]
    nav = "".join(f'<a href="#{s}">{s}</a>' for s in SECTIONS)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)} · Reef</title><style>{CSS}</style></head>"
        f"<body>{top}<main><header>"
        f"<h1>{_e(name)} · {_e(release.tag)} {_badge(proposals.shown_status(release, states))}</h1>"
        f"<div>{_e(headline)}</div>"
        f'<div class="note">{_e(meta.get("created_at", ""))} · gate '
        f"{_e((meta.get('gate') or {}).get('verdict', '-'))}</div>"
        f"</header><nav>{nav}</nav>" + "".join(parts) + "</main></body></html>\n"
    )

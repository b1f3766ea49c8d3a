"""Plots of evaluation numbers: `reef eval --plot` and the release page's verdict figure.

matplotlib is an extra (``reef[tasks]``), imported only when a plot is drawn; without it
``ExtraMissing`` names the install. Figures are drawn on matplotlib's ``Figure`` with the
Agg canvas directly — no pyplot, no global backend — so `reef serve` can draw pages from
several threads at once.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reef_cli.core.errors import ExtraMissing

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from reef_cli.core.feedback_curve import Point, ReleaseMark

INSTALL = "pip install 'reef[tasks]'"
SCORE = "#1f6feb"
LENIENT = "#d97706"
INCUMBENT = "#6b7280"
CANDIDATE = "#16a34a"


def require_matplotlib(what: str = "plots") -> None:
    """Raise ``ExtraMissing`` now (before any work) when matplotlib cannot be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ExtraMissing(f"{what} need matplotlib, which is not installed", INSTALL) from exc


def _figure(width: float, height: float) -> Figure:
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", facecolor="white")
    return buf.getvalue()


def _errorbar(
    ax: Axes,
    xs: list[float],
    means: list[float],
    cis: list[list[float] | None],
    fmt: str = "o",
    **style: Any,
) -> None:
    low = [m - (ci[0] if ci else m) for m, ci in zip(means, cis, strict=True)]
    high = [(ci[1] if ci else m) - m for m, ci in zip(means, cis, strict=True)]
    ax.errorbar(xs, means, yerr=[low, high], fmt=fmt, capsize=6, markersize=8, lw=2, **style)


def _score_axis(ax: Axes, lowest: float, highest: float) -> None:
    """Scores are 0..1; the axis shows that range, widened if a value falls outside."""
    ax.set_ylim(min(0.0, lowest) - 0.05, max(1.0, highest) + 0.05)
    ax.grid(axis="y", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)


def eval_plot(report: dict[str, Any], path: Path) -> Path:
    """Per release: the mean score with its 95% interval (and the lenient mean where tasks
    name one), the first release's mean as a dashed reference line; PNG at ``path``."""
    entries = [e for e in report.get("releases", []) if e.get("mean") is not None]
    fig = _figure(max(5.0, 1.4 * len(report.get("releases", [])) + 2.5), 4.6)
    ax = fig.add_subplot()
    labels = []
    for entry in report.get("releases", []):
        label = f"r{entry['release']}\nn={entry['tasks']} tasks"
        if entry.get("invalid"):
            label += f"\n{entry['invalid']} invalid run(s)"
        diff = (entry.get("vs_first") or {}).get("mean_diff")
        if diff is not None:
            label += f"\nΔ {diff:+.3f}"
        labels.append(label)
    xs = list(range(len(labels)))
    ax.set_xticks(xs, labels)
    ax.set_xlim(-0.6, len(labels) - 0.4)
    values: list[float] = []
    if entries:
        index = {id(e): i for i, e in enumerate(report["releases"])}
        at = [float(index[id(e)]) for e in entries]
        means = [float(e["mean"]) for e in entries]
        cis = [e.get("ci95") for e in entries]
        _errorbar(ax, at, means, cis, color=SCORE, label="mean score (95% CI)")
        for x, mean in zip(at, means, strict=True):
            ax.annotate(
                f"{mean:.3f}", (x, mean), xytext=(10, 0), textcoords="offset points", va="center"
            )
        values += means + [v for ci in cis if ci for v in ci]
        first = report["releases"][0].get("mean")
        if first is not None:
            ax.axhline(first, color=SCORE, ls="--", lw=1, alpha=0.5, label="first release")
    lenient = [e for e in entries if (e.get("lenient") or {}).get("mean") is not None]
    if lenient:
        index = {id(e): i for i, e in enumerate(report["releases"])}
        at = [index[id(e)] - 0.2 for e in lenient]  # left: the value labels sit right
        means = [float(e["lenient"]["mean"]) for e in lenient]
        cis = [e["lenient"].get("ci95") for e in lenient]
        _errorbar(ax, at, means, cis, "D", color=LENIENT, label="lenient measure (95% CI)")
        values += means + [v for ci in cis if ci for v in ci]
    _score_axis(ax, min(values, default=0.0), max(values, default=1.0))
    ax.set_ylabel("mean score over tasks (0..1)")
    ax.set_xlabel("release")
    name = report.get("task_set") or "task set"
    ax.set_title(  # two lines: a long task-set name must not run off the figure
        f"{report.get('scenario', '')}: {name}\n{report.get('split', 'test')} split, "
        f"{report.get('repeats', 1)} repeat(s) per task",
        fontsize=11,
    )
    if entries:
        ax.legend(loc="best", fontsize=8, framealpha=0.9)
    path.write_bytes(_png(fig))
    return path


def verdict_plot(numbers: dict[str, Any]) -> bytes:
    """A gate evaluation as a PNG: incumbent and candidate means with their 95% intervals
    (and the lenient measure), and beside them every task's difference with the mean
    difference's interval — what the verdict rests on, at a glance."""
    if numbers.get("candidate_mean") is None or numbers.get("incumbent_mean") is None:
        raise ValueError("the evaluation holds no means to plot (it was invalid)")
    fig = _figure(9.0, 4.2)
    left, right = fig.subplots(1, 2, width_ratios=[1, 1.3])
    n = numbers.get("tasks", "?")
    repeats = numbers.get("repeats")
    means = [float(numbers["incumbent_mean"]), float(numbers["candidate_mean"])]
    cis = [numbers.get("incumbent_ci95"), numbers.get("candidate_ci95")]
    for x, mean, ci, colour in zip((0, 1), means, cis, (INCUMBENT, CANDIDATE), strict=True):
        _errorbar(left, [x], [mean], [ci], color=colour)
        left.annotate(
            f"{mean:.3f}", (x, mean), xytext=(10, 0), textcoords="offset points", va="center"
        )
    values = means + [v for ci in cis if ci for v in ci]
    lenient = numbers.get("lenient") or {}
    if lenient.get("candidate_mean") is not None:
        lm = [float(lenient["incumbent_mean"]), float(lenient["candidate_mean"])]
        left.plot([0.2, 1.2], lm, "D", color=LENIENT, markerfacecolor="none", label="lenient")
        left.legend(loc="upper left", fontsize=8, frameon=False)
        values += lm
    left.set_xticks([0, 1], [f"incumbent\nn={n} tasks", f"candidate\nn={n} tasks"])
    left.set_xlim(-0.5, 1.6)
    _score_axis(left, min(values), max(values))
    left.set_ylabel("mean score over tasks (0..1)")
    left.set_title("mean score, 95% CI", fontsize=10)

    per_task = numbers.get("per_task") or {}
    diffs = sorted(float(v) for v in per_task.values())
    if diffs:
        colours = [CANDIDATE if d > 0 else INCUMBENT if d < 0 else "#9ca3af" for d in diffs]
        right.scatter(range(len(diffs)), diffs, c=colours, s=28, zorder=3)
    right.axhline(0, color="black", lw=0.8)
    diff_ci = numbers.get("diff_ci95")
    if diff_ci:
        right.axhspan(diff_ci[0], diff_ci[1], color=SCORE, alpha=0.15, label="Δ 95% CI")
    if numbers.get("mean_diff") is not None:
        right.axhline(numbers["mean_diff"], color=SCORE, lw=1.5, label="mean Δ")
    right.set_xlabel(f"tasks, sorted by difference (n={len(diffs)})")
    right.set_ylabel("candidate − incumbent")
    right.set_ylim(-1.05, 1.05)
    right.grid(axis="y", alpha=0.3)
    right.spines[["top", "right"]].set_visible(False)
    right.legend(loc="best", fontsize=8, framealpha=0.9)
    wlt = ""
    if "wins" in numbers:
        wlt = f"\n{numbers['wins']} wins / {numbers['losses']} losses / {numbers['ties']} ties"
        wlt += f", sign test p={numbers.get('p')}"
    right.set_title(f"per-task difference{wlt}", fontsize=10)
    title = "Gate evaluation: candidate vs incumbent"
    if repeats:
        title += f" ({repeats} repeat(s) per task)"
    fig.suptitle(title, fontsize=12)
    return _png(fig)


ARMS = ("before", "after", "aa", "placebo", "raw_feedback", "oracle")


def learn_plot(result: dict[str, Any], path: Path) -> Path:
    """`reef bench learn`: left, the per-session accept curve (each session 0/1, the
    running share of the last three) with a line where each release went live; right,
    each arm's held-out strict and lenient means. PNG at ``path``."""
    fig = _figure(11.0, 4.4)
    left, right = fig.subplots(1, 2, width_ratios=[3, 2])
    curve = [int(x) for x in result.get("accept_curve", [])]
    xs = list(range(1, len(curve) + 1))
    left.step(xs, curve, where="mid", color=INCUMBENT, alpha=0.4)
    left.scatter(xs, curve, color=[CANDIDATE if c else "#dc2626" for c in curve], zorder=3)
    rolling = [
        sum(curve[max(0, i - 2) : i + 1]) / len(curve[max(0, i - 2) : i + 1])
        for i in range(len(curve))
    ]
    left.plot(xs, rolling, color=SCORE, lw=2, label="accepted, last 3 sessions")
    for release in result.get("releases", []):
        at = release.get("after_session")
        if at is not None:
            left.axvline(at + 0.5, color=CANDIDATE, ls="--", lw=1.5)
            left.annotate(f"r{release['number']}", (at + 0.5, 1.08), ha="center", color=CANDIDATE)
    adapted = result.get("sessions_to_adaptation")
    if adapted:
        left.axvspan(adapted - 0.5, adapted + 2.5, color=CANDIDATE, alpha=0.08)
    _score_axis(left, 0.0, 1.1)
    left.set_xlabel("session")
    left.set_ylabel("accepted (1) or not (0)")
    where = f"adapted at session {adapted}" if adapted else "never three accepted in a row"
    left.set_title(f"{result.get('persona', '')}, live through reef serve: {where}", fontsize=10)
    left.legend(loc="lower right", fontsize=8)
    arms = result.get("arms") or {}
    names = [a for a in ARMS if a in arms]
    at = list(range(len(names)))
    strict = [float(arms[a]["strict"]) for a in names]
    lenient = [float(arms[a]["lenient"]) for a in names]
    right.bar([x - 0.2 for x in at], strict, width=0.4, color=SCORE, label="strict")
    right.bar([x + 0.2 for x in at], lenient, width=0.4, color=LENIENT, label="lenient")
    right.set_xticks(at, [n.replace("_", "\n") for n in names], fontsize=8)
    _score_axis(right, 0.0, 1.0)
    n = (result.get("heldout") or {}).get("prompts", 0)
    right.set_title(f"held-out prompts (n={n}), mean per arm", fontsize=10)
    right.legend(loc="upper left", fontsize=8)
    path.write_bytes(_png(fig))
    return path


def feedback_plot(points: list[Point], releases: list[ReleaseMark], this_release: int) -> bytes:
    """The release page's accept curve as a PNG: each reported session's score (green:
    accepted), the running mean of the last three, a line where each release went live
    and this page's release drawn heavier."""
    from reef_cli.core.feedback_curve import running_mean

    fig = _figure(9.0, 3.8)
    ax = fig.add_subplot()
    xs = [p.index for p in points]
    scores = [p.score for p in points]
    ax.plot(xs, scores, color=INCUMBENT, alpha=0.3, lw=1)
    size = 22 if len(points) > 100 else 36
    for accepted, colour, label in (
        (True, CANDIDATE, "accepted"),
        (False, "#dc2626", "not accepted"),
    ):
        shown = [p for p in points if p.accepted is accepted]
        if shown:
            where = [p.index for p in shown]
            ax.scatter(where, [p.score for p in shown], color=colour, s=size, zorder=3, label=label)
    ax.plot(xs, running_mean(scores), color=SCORE, lw=2, label="mean of the last 3 sessions")
    for mark in releases:
        at = mark.after + 0.5
        this = mark.this or mark.number == this_release
        colour = LENIENT if this else INCUMBENT
        ax.axvline(at, color=colour, ls="-" if this else "--", lw=2.5 if this else 1, zorder=2)
        label = f"r{mark.number}" + (" (this page)" if this else "")
        ax.annotate(
            label,
            (at, 1.1),
            ha="center",
            color=colour,
            fontsize=8,
            fontweight="bold" if this else "normal",
            bbox={"fc": "white", "ec": "none", "pad": 1},
            zorder=4,
        )
    _score_axis(ax, 0.0, 1.15)
    ax.set_xlim(0, max(len(points), 1) + 1)
    ax.set_xlabel(f"reported session, in the order it began (n={len(points)})")
    ax.set_ylabel("score (1 = accepted)")
    ax.set_title(f"Feedback from use, with r{this_release} and the releases around it", fontsize=10)
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    return _png(fig)

"""The release page: one self-contained, escaped HTML page per release, and
`reef harness page`. ``publish_plain`` / ``publish_evaluated`` are shared with the
headless-Chromium test (tests/e2e/test_release_page_chromium.py)."""

from __future__ import annotations

import base64
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from reef_cli.core import scenarios
from reef_cli.core.checks import Check
from reef_cli.core.errors import ReleaseNotFound
from reef_cli.core.publishing import publish_files
from reef_cli.core.release_page import SECTIONS, render_page
from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.core.tree import starter_tree
from tests.cli.helpers import reef, reef_fails
from tests.core.test_feedback_curve import session

HOSTILE = '<script>alert("r")</script><img src=x onerror=alert(1)>'
ASK = "when I ask for a fix, write a failing test first"
EVALUATION: dict[str, Any] = {
    "status": "passed",
    "reason": "candidate beats incumbent (sign test 5 wins / 0 losses, p=0.031)",
    "split": "test",
    "numbers": {
        "tasks": 6,
        "repeats": 2,
        "candidate_mean": 0.8333,
        "candidate_ci95": [0.5, 1.0],
        "incumbent_mean": 0.1667,
        "incumbent_ci95": [0.0, 0.5],
        "mean_diff": 0.6667,
        "diff_ci95": [0.3333, 1.0],
        "per_task": {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0, "e": 0.0, "f": 0.5},
        "wins": 5,
        "losses": 0,
        "ties": 1,
        "p": 0.0312,
        "lenient": {
            "tasks": 6,
            "candidate_mean": 0.9,
            "incumbent_mean": 0.5,
            "mean_diff": 0.4,
            "ci95": [0.1, 0.7],
        },
    },
}
TRIAL = {
    "agent": "pi",
    "agent_version": "1.6.0",
    "sandbox": "bwrap",
    "returncode": 0,
    "loaded": True,
    "requests": 2,
    "receipts": ["rec_aaa", "rec_bbb"],
    "found": [{"text": "failing test first", "receipt": "rec_aaa", "in": "system"}],
    "answer_excerpt": "I will write a failing test first. " + HOSTILE,
}


def publish_plain(name: str = "demo") -> int:
    """A scenario whose r1 is a hand publish (no evaluation, no trial); returns 1."""
    scenarios.create(name)
    release, _ = publish_files(name, starter_tree().files(), reason="start " + HOSTILE)
    return release.number


def publish_evaluated(name: str = "demo") -> int:
    """r2 of ``name``: a recipe's release with a trial and a gate evaluation in its
    metadata and checks, the way ``engine._judge`` publishes; returns 2."""
    files = {
        **starter_tree().files(),
        "rules/tests-first.md": f"Write a failing test first. {HOSTILE}\n",
    }
    release, _ = publish_files(
        name,
        files,
        reason=ASK,
        source="recipe:reefine",
        recipe="reefine",
        extra={
            "ask": ASK,
            "evaluation": EVALUATION,
            "trial": TRIAL,
            "changes": [
                {
                    "kind": "rule",
                    "name": "tests-first",
                    "path": "rules/tests-first.md",
                    "summary": "added rule tests-first",
                    "why": "The developer asked " + HOSTILE,
                }
            ],
        },
        extra_checks=[
            Check("trial", "passed", "pi loaded the change"),
            Check("evaluation", "passed", EVALUATION["reason"], ["wins=5", "p=0.0312"]),
        ],
    )
    return release.number


class Parsed(HTMLParser):
    """Section ids, image sources and every src/href in a page."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.images: list[str] = []
        self.links: list[str] = []
        self.scripts = 0
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "section":
            self.sections.append(found.get("id") or "")
        if tag == "img":
            self.images.append(found.get("src") or "")
        if tag == "script":
            self.scripts += 1
        for key in ("src", "href"):
            if found.get(key):
                self.links.append(found[key] or "")


def section(html: str, name: str) -> str:
    found = re.search(rf'<section id="{name}">(.*?)</section>', html, re.DOTALL)
    assert found, name
    return found.group(1)


def assert_self_contained(html: str) -> Parsed:
    parsed = Parsed(html)
    assert parsed.sections == list(SECTIONS)
    assert parsed.scripts == 0
    assert "http://" not in html and "https://" not in html
    assert all(link.startswith(("#", "data:image/png;base64,")) for link in parsed.links)
    return parsed


def test_plain_publish_page_says_what_it_lacks() -> None:
    number = publish_plain()
    html = render_page("demo", number)
    parsed = assert_self_contained(html)
    assert parsed.images == []
    assert "No evaluation" in section(html, "evaluation")
    assert "No trial" in section(html, "trial")
    assert "The first release: every file is new" in section(html, "changes")
    assert "rules/working-style.md" in section(html, "changes")
    chain = section(html, "chain")
    assert "none (the first release)" in chain and "r1 (this page, served)" in chain
    assert "tree" in section(html, "verdict") and "credential-scan" in section(html, "verdict")
    feedback = section(html, "feedback")
    assert "no reported sessions yet in demo" in feedback and "<img" not in feedback


def test_everything_a_release_holds_is_escaped() -> None:
    publish_plain()
    publish_evaluated()
    for number in (1, 2):
        html = render_page("demo", number)
        assert "<script" not in html and "<img src=x" not in html
        assert "&lt;script&gt;alert(&quot;r&quot;)&lt;/script&gt;" in html
        assert "onerror=alert(1)&gt;" in html


def test_evaluated_release_has_numbers_plot_trial_and_diff() -> None:
    publish_plain()
    number = publish_evaluated()
    html = render_page(scenarios.get("demo"), number)
    parsed = assert_self_contained(html)
    assert len(parsed.images) == 1
    png = base64.b64decode(parsed.images[0].removeprefix("data:image/png;base64,"))
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    evaluation = section(html, "evaluation")
    for text in (
        "candidate beats incumbent",
        "0.833 [0.500, 1.000]",
        "0.167 [0.000, 0.500]",
        "+0.667 [0.333, 1.000]",
        "5/0/1, sign test p=0.0312",
        "candidate 0.900, incumbent 0.500",
        "6 x 2 repeat(s)",
    ):
        assert text in evaluation, text
    why = section(html, "why")
    assert ASK in why and "recipe:reefine" in why and "added rule tests-first" in why
    verdict = section(html, "verdict")
    assert "pi loaded the change" in verdict and "p=0.0312" in verdict
    trial = section(html, "trial")
    assert "pi 1.6.0" in trial and "rec_aaa, rec_bbb" in trial and "system" in trial
    assert "I will write a failing test first." in trial
    changes = section(html, "changes")
    assert "Compared with r1" in changes and "added: rules/tests-first.md (+1 −0)" in changes
    assert '<span class="add">+Write a failing test first.' in changes
    chain = section(html, "chain")
    assert "<dd>r1</dd>" in chain and "none (the latest release)" in chain


def test_neighbours_in_the_chain_and_an_unknown_release() -> None:
    publish_plain()
    publish_evaluated()
    publish_files("demo", starter_tree().files(), reason="back", source="rollback", points_to=1)
    chain = section(render_page("demo", 2), "chain")
    assert "<dt>previous</dt><dd>r1</dd>" in chain and "<dt>next</dt><dd>r3</dd>" in chain
    assert "<dt>served</dt><dd>r3</dd>" in chain and "rollback → r1" in chain
    with pytest.raises(ReleaseNotFound, match="r9"):
        render_page("demo", 9)


def test_without_matplotlib_the_page_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    publish_plain()
    publish_evaluated()
    session(SQLiteStore(), "demo", "s1", 1)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    html = render_page("demo", 2)
    evaluation = section(html, "evaluation")
    assert "<img" not in evaluation and "0.833 [0.500, 1.000]" in evaluation
    assert "No plot:" in evaluation and "pip install &#x27;reef[tasks]&#x27;" in evaluation
    feedback = section(html, "feedback")
    assert "<img" not in feedback and "1 of 1 accepted (100%)" in feedback
    assert "No plot:" in feedback and "pip install &#x27;reef[tasks]&#x27;" in feedback


def seed_around_r2() -> SQLiteStore:
    """demo: r1, two reported sessions, r2 (evaluated), four reported sessions."""
    store = SQLiteStore()
    publish_plain()
    session(store, "demo", "a", 0)
    session(store, "demo", "b", 1)
    publish_evaluated()
    for sid, score in (("c", 0), ("d", 1), ("e", 1), ("f", 1)):
        session(store, "demo", sid, score)
    return store


def test_feedback_section_shows_the_accept_curve_around_the_release() -> None:
    store = seed_around_r2()
    html = render_page("demo", 2, store=store)
    parsed = assert_self_contained(html)
    assert len(parsed.images) == 2  # the evaluation's and the feedback's
    feedback = section(html, "feedback")
    found = re.findall(r'src="data:image/png;base64,([^"]+)"', feedback)
    assert len(found) == 1
    png = base64.b64decode(found[0])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert "6 reported session(s) of demo" in feedback
    for text in (
        "<th>sessions before r2</th><td>1 of 2 accepted (50%)</td>",
        "<th>sessions after r2</th><td>3 of 4 accepted (75%)</td>",
        "<th>sessions to adaptation</th><td>2 (the first of three accepted sessions",
    ):
        assert text in feedback, text
    live = scenarios.get("demo").chain().get(2).meta.created_at
    assert f"<th>went live</th><td>{live}</td>" in feedback
    first = section(render_page("demo", 1, store=store), "feedback")
    assert "<th>sessions before r1</th><td>none</td>" in first
    assert "<th>sessions after r1</th><td>4 of 6 accepted (67%)</td>" in first
    assert "<th>sessions to adaptation</th><td>4 (" in first  # d e f: the 4th after r1


def test_feedback_reads_the_configured_store_when_none_is_given() -> None:
    seed_around_r2()
    scenarios.create("other")
    session(SQLiteStore(), "other", "a", 0, 0, 0)  # the same session id, another scenario
    feedback = section(render_page("demo", 2), "feedback")
    assert "6 reported session(s) of demo" in feedback and "1 of 2 accepted (50%)" in feedback


def test_an_invalid_evaluation_has_no_plot() -> None:
    publish_plain()
    invalid = {
        "status": "invalid",
        "reason": "1 task(s) have no valid score (evaluator or model failure): a",
        "split": "test",
        "numbers": {"failed_tasks": ["a"]},
    }
    publish_files("demo", {**starter_tree().files(), "rules/x.md": "x\n"}, reason="x",
                  extra={"evaluation": invalid})  # fmt: skip
    evaluation = section(render_page("demo", 2), "evaluation")
    assert "<img" not in evaluation and "no means" in evaluation
    assert "tasks with no valid score" in evaluation and "invalid" in evaluation


def test_harness_page_writes_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    publish_plain()
    publish_evaluated()
    monkeypatch.chdir(tmp_path)
    out = reef("harness", "page", "latest", "-s", "demo")
    assert out.strip() == "release-demo-2.html"
    assert '<section id="evaluation">' in (tmp_path / "release-demo-2.html").read_text()
    target = tmp_path / "pages" / "one.html"
    target.parent.mkdir()
    assert reef("harness", "page", "1", "-s", "demo", "-o", str(target)).strip() == str(target)
    assert "No evaluation" in target.read_text()
    line = reef_fails("harness", "page", "7", "-s", "demo")
    assert "r7 does not exist" in line
    line = reef_fails("harness", "page", "1", "-s", "demo", "-o", str(tmp_path / "no" / "x.html"))
    assert "cannot write" in line and "-o" in line

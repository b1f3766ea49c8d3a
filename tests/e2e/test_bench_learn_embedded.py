"""`reef bench learn` on the embedded model, end to end, no scripted model anywhere: a
persona plays six sessions through a real `reef serve` whose live loop runs SkillClaw on
the (lite) embedded model, then the held-out arms are answered.

What a 135M model learns is not the point here (docs/results.md measures the 1.5B one):
the apparatus is. Every number the JSON promises is there; the A/A control is exactly 0
(greedy decoding is deterministic, so anything else is a fault); the held-out prompts
never reached the proxy; the run ended and the plot was drawn."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PERSONA = """\
name: tiny-commits
prompts:
  source: list
  train: 6
  heldout: 3
  seed: 5
  items:
    - prompt: "Write the commit message for this change: a typo in the README is fixed."
    - prompt: "Write the commit message for this change: the parser accepts tabs."
    - prompt: "Write the commit message for this change: CI runs on Python 3.12."
    - prompt: "Write the commit message for this change: the cache expires entries."
    - prompt: "Write the commit message for this change: a flag prints each request."
    - prompt: "Write the commit message for this change: the logger hides secrets."
    - prompt: "Write the commit message for this change: old migrations are removed."
    - prompt: "Write the commit message for this change: retries on HTTP 503."
    - prompt: "Write the commit message for this change: a dark mode toggle."
checks:
  - starts_with: '^(feat|fix|docs|chore|test|refactor)(\\([a-z0-9-]+\\))?: '
    complaint: "Use Conventional Commits: start with a type such as feat: or fix:."
lenient:
  - min_words: 3
max_tokens: 40
"""


def test_a_persona_runs_live_on_the_embedded_model(reef_home: Path, tmp_path: Path) -> None:
    persona = tmp_path / "tiny.yaml"
    persona.write_text(PERSONA, encoding="utf-8")
    home, plot = tmp_path / "run", tmp_path / "curve.png"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "reef_cli",
            "bench",
            "learn",
            "--persona",
            str(persona),
            "--batch-size",
            "5",
            "--home",
            str(home),
            "--plot",
            str(plot),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    result = json.loads(done.stdout)
    assert len(result["accept_curve"]) == 6 and set(result["accept_curve"]) <= {0, 1}
    assert result["model"].startswith("embedded")
    # five sessions fill the batch: the first run starts after session 5 (a run that
    # ends failed or invalid — a call cut at its time limit on a busy machine — is
    # tried again, so there may be a second); every run ended
    runs = result["runs"]
    assert runs and runs[0]["after_session"] == 5
    ended = ("published", "rejected", "unchanged", "failed", "invalid")
    assert all(r["state"] in ended for r in runs), runs
    assert result["heldout"]["prompts"] == 3
    for measure in ("strict", "lenient"):
        numbers = result["heldout"][measure]
        assert {"before", "after", "diff", "diff_ci", "wins", "losses", "ties"} <= set(numbers)
        aa = result["controls"]["aa"][measure]
        assert aa["diff"] == 0.0 and aa["diff_ci"] == [0.0, 0.0]
        for control in ("placebo", "raw_feedback", "oracle"):
            assert "diff_ci" in result["controls"][control][measure]
    assert set(result["arms"]) == {"before", "after", "aa", "placebo", "raw_feedback", "oracle"}
    assert plot.read_bytes().startswith(b"\x89PNG")
    # the proxy recorded the six train prompts and nothing of the held-out ones
    with sqlite3.connect(home / "records.sqlite3") as db:
        bodies = " ".join(row[0] for row in db.execute("select request from records"))
    assert bodies.count("Write the commit message") == 6
    asked = {entry["prompt"] for entry in result["session_log"]}
    assert len(asked) == 6

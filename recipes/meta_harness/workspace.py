"""The proposer's workspace: a folder Reef writes afresh before each iteration, from what
it holds in memory (so an agent that edits an earlier candidate's scores changes
nothing), and one place the agent writes: ``next/``.

    README.md                       what may change, how it is judged
    history.json                    every iteration: its parent, its end, why refused
    candidates/<k>/tree/            candidate k's harness tree (0: the served release)
    candidates/<k>/scores.json      per train/val task: score, lenient score; the means
    candidates/<k>/traces/<id>.md   a failed train/val task: prompt, answer, feedback
    candidates/<k>/NOTES.md         what the agent said it changed and why
    next/tree/                      the tree to edit (a copy of the best candidate's)
    next/NOTES.md                   the agent's notes for this candidate

No test task is ever written here: ``Context.tasks`` holds train and val only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from recipes.meta_harness.frontier import Kept
from recipes.tasks import TaskSet
from reef_cli.core.tree import Limits, read_folder

NOTES_MAX = 8 * 1024  # the agent's notes kept per candidate
TRACE_ANSWER_MAX = 4000

README = """# Meta-Harness workspace

You are improving the harness of an AI coding agent: the rules and skills it reads
before every task. Each candidate harness is scored on tasks, and the best one is
judged afterwards on other tasks you never see.

## What is here

- `candidates/<k>/tree/`: candidate k's harness. Candidate 0 is the one served now.
- `candidates/<k>/scores.json`: each task's score (1 = passed) and lenient score (the
  work done, format ignored), and the means per split.
- `candidates/<k>/traces/`: for each task candidate k failed, the prompt, the answer it
  got and why the scorer failed it. Read these: they say what to change.
- `candidates/<k>/NOTES.md`: what was changed in candidate k, and why.
- `history.json`: every attempt so far, including refused ones and why.
- `next/tree/`: a copy of the best candidate so far ({best}). Edit it into the next
  candidate.

## What you may change

Only files under `next/tree/`: rules are `rules/<name>.md`, skills are
`skills/<name>/SKILL.md` (with `name` and `description` frontmatter). Keep each rule short
and specific. Write two or three sentences in `next/NOTES.md`: what you changed and why.
Do not write anywhere outside this folder: an agent that tries is stopped.

## How it is judged

The candidate is scored on the {train} train and {val} val tasks; the best on val goes on
to tasks you never see. A candidate that deletes a rule or skill (or cuts it below half)
is kept only when its val score is better than its parent's. A candidate that holds a
credential, breaks the tree's rules or changes nothing is refused. {iterations} attempts in
all; this is attempt {iteration}.
"""


def _write_tree(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


class Workspace:
    def __init__(self, root: Path, tasks: TaskSet, iterations: int) -> None:
        self.root, self.tasks, self.iterations = root, tasks, iterations
        self.prompts = {t.id: t.prompt for t in tasks.tasks}

    def write(
        self, kept: list[Kept], history: list[dict[str, Any]], best: Kept, iteration: int
    ) -> None:
        """Everything the agent reads for ``iteration``, rewritten from Reef's own record,
        and ``next/`` reset to the best candidate's tree."""
        for name in ("candidates", "next"):
            shutil.rmtree(self.root / name, ignore_errors=True)
        counts = {s: len(self.tasks.split(s)) for s in ("train", "val")}
        (self.root / "README.md").write_text(
            README.format(
                best=f"candidate {best.number}",
                train=counts["train"],
                val=counts["val"],
                iterations=self.iterations,
                iteration=iteration,
            ),
            encoding="utf-8",
        )
        (self.root / "history.json").write_text(json.dumps(history, indent=2), encoding="utf-8")
        for candidate in kept:
            self._candidate(candidate)
        _write_tree(self.root / "next" / "tree", best.files)
        (self.root / "next" / "NOTES.md").write_text("", encoding="utf-8")

    def _candidate(self, kept: Kept) -> None:
        folder = self.root / "candidates" / str(kept.number)
        _write_tree(folder / "tree", kept.files)
        scores = {"candidate": kept.number, "parent": kept.parent, **kept.scores.to_json()}
        (folder / "scores.json").write_text(json.dumps(scores, indent=2), encoding="utf-8")
        if kept.notes:
            (folder / "NOTES.md").write_text(kept.notes, encoding="utf-8")
        traces = folder / "traces"
        traces.mkdir(parents=True, exist_ok=True)
        for tid in kept.scores.failed():
            run = kept.scores.runs[tid]
            answer = run.answer
            if len(answer) > TRACE_ANSWER_MAX:
                answer = answer[:TRACE_ANSWER_MAX] + " …"
            (traces / f"{tid}.md").write_text(
                f"# {tid} ({kept.scores.splits[tid]}): score {run.score}, lenient {run.lenient}\n\n"
                f"## Prompt\n\n{self.prompts.get(tid, '')}\n\n## Answer\n\n{answer}\n\n"
                f"## Why it failed\n\n{run.feedback or '(no feedback)'}\n",
                encoding="utf-8",
            )

    def read_next(self) -> tuple[dict[str, str], str]:
        """The tree the agent wrote and its notes; ``TreeError`` for a folder that breaks
        the tree's safety rules (a symlink, a binary, an oversize file …)."""
        files = read_folder(self.root / "next" / "tree", Limits())
        notes_file = self.root / "next" / "NOTES.md"
        notes = ""
        if notes_file.is_file() and not notes_file.is_symlink():
            notes = notes_file.read_text(encoding="utf-8", errors="replace")[:NOTES_MAX]
        return files, notes.strip()

"""Meta-Harness: a coding agent edits the harness as a whole, with every earlier
candidate's tree, scores and failing traces at hand in a workspace of its own.

GEPA rewrites one text at a time from a reflection prompt; here the proposer is an agent
Reef already runs (pi, Claude Code, Codex CLI, opencode), sandboxed, through the job's
recording gateway. Each iteration it reads the workspace and writes the next candidate;
Reef validates it, scores it on the task set's train and val splits and keeps a frontier.
The best candidate on val goes to the gate, which judges it on the test split like any
other candidate — a split the workspace never holds. The parts:

- ``workspace`` — the folder the agent works in: ``candidates/<k>/`` (tree, scores,
  traces of failed train/val tasks, the agent's notes), ``next/`` (where it writes), a
  README saying what it may change and how it is judged;
- ``watch`` — the files an agent's model call shows it writing; a write outside the
  workspace stops the agent;
- ``frontier`` — a candidate's scores, the deletion rule and the choice of the best;
- ``recipe`` — the loop and its options (iterations, the proposer's time).

See docs/meta-harness.md.
"""

from reef_cli.core.plugins import RecipeInfo

# The row pyproject.toml registers under the entry-point group ``reef.recipes``.
RECIPE = RecipeInfo(
    name="meta-harness",
    factory="recipes.meta_harness.recipe:MetaHarness",
    summary="an agent edits the tree with every earlier candidate's scores and traces at hand",
    needs_tasks=True,
)

"""GEPA: a task set with a programmatic scorer -> the tree's rule and skill texts,
evolved by the ``gepa`` package's engine (Pareto selection, reflective mutation, merge).

The candidate is the dict of tree texts (``components``); GEPA's val split selects, the
gate judges on the held-out test split. The parts:

- ``components`` — a tree as GEPA's candidate and back (bodies only; frontmatter and the
  other files are Reef's);
- ``reflection`` — the reflection prompt a small model follows, as gepa's
  ``custom_candidate_proposer``, each call charged to the job's budget;
- ``search`` — the adapter (with its greedy-decoding cache), the metric-call meter and
  stopper, the default budget's fit to the time limit, and one ``optimize`` run;
- ``budget`` — the default ``max_metric_calls`` and its fit to the time limit;
- ``heard`` — what people said: each task's complaint, the accepted sessions (which
  ``recipes.demos`` turns into a second seed candidate).

``gepa`` is imported only when a search runs, so `reef --help` never loads it.
See docs/gepa.md.
"""

from reef_cli.core.plugins import RecipeInfo

# The row pyproject.toml registers under the entry-point group ``reef.recipes``.
RECIPE = RecipeInfo(
    name="gepa",
    factory="recipes.gepa.recipe:Gepa",
    summary="a search on a task set",
    needs_tasks=True,
)

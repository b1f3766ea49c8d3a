"""Reefine: one plain-language ask -> one typed, tested change to the harness.

ask -> (up to two clarifying questions) -> the model drafts a typed change -> validated,
trimmed of actions the ask did not name (``scope``) and applied to a copy of the served
tree -> a probe task for the trial, and the text the recorded request must contain to show
the change loaded. The engine runs the trial and the gate, then asks the recipe's
``follow`` check (``follow``: is the change followed on check prompts, compared with the
served release?) and publishes.
"""

from reef_cli.core.plugins import RecipeInfo

# The row pyproject.toml registers under the entry-point group ``reef.recipes``.
RECIPE = RecipeInfo(
    name="reefine",
    factory="recipes.reefine.recipe:Reefine",
    summary="a change drafted from an ask",
    needs_ask=True,
)

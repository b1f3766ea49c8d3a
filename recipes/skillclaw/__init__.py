"""SkillClaw: the sessions and reports since the last run -> edits to the tree's skills.

new sessions (``core.evidence`` + the ``skillclaw`` mark) -> a score for each (reported,
implicit from the turns, or judged) -> what the person said about failed answers becomes
rules and facts (``rules``: one complaint, one line, citing its reports) -> the other
sessions are grouped by the skill each used -> one decision per
group (improve a body, optimise a description, create a skill, skip) -> a create that
collides with an existing skill is merged into it -> every edit verified (deterministic
checks, then a verifier call) -> one candidate with the surviving edits and replay tasks
built from the batch. The engine gates it; ``settle`` moves the mark once the batch was
consumed (published, pending or rejected). See docs/skillclaw.md.

The parts: ``signals`` (scores), ``rules`` (complaints -> rules and facts), ``decide``
(groups and decisions), ``merge`` (lines of guidance, merges), ``verify`` (the checks and
the verifier), ``skills`` (SKILL.md text), ``replay`` (the replay tasks), ``guard`` (the
credential scan before text leaves).
"""

from reef_cli.core.plugins import RecipeInfo

# The row pyproject.toml registers under the entry-point group ``reef.recipes``.
RECIPE = RecipeInfo(
    name="skillclaw",
    factory="recipes.skillclaw.recipe:SkillClaw",
    summary="skills learned from the recorded sessions and reports",
    reads_sessions=True,
)

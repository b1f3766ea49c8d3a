"""The scripted model (``claw``) for every SkillClaw test module."""

from tests.recipes.skillclaw.test_skillclaw import claw  # noqa: F401  (a fixture)

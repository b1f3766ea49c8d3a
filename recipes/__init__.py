"""recipes: the evolve engine, the recipes (Reefine, GEPA, SkillClaw), trials, task sets,
`reef eval` and the serve job worker (docs/architecture.md)."""

"""`reef hook AGENT EVENT …`: the entry point an agent's installed hooks run.

Claude Code's ``settings.json`` and Codex's Reef profile run ``reef hook claude-code|codex
session-start|user-prompt-submit --config F`` with ``reef`` resolved when the hook runs (see
adapters/claude_code/render.py, adapters/codex/render.py), so a moved or rebuilt venv does
not leave an absolute interpreter path behind. Which agents have hooks: the ``hook`` column
of their rows in ``reef_cli.core.agents`` (a plugin's agent too).
"""

from __future__ import annotations

import typer

HOOK_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True}


def hook(
    ctx: typer.Context,
    agent: str = typer.Argument(..., help="The agent whose hook runs (its row names one)."),
) -> None:
    """Run an installed agent hook (called by the agent, not by people)."""
    import importlib

    from reef_cli.core import agents
    from reef_cli.core.errors import ReefError

    found = agents.find(agent)
    if found is None or found.hook is None:
        with_hooks = ", ".join(a.name for a in agents.registered() if a.hook)
        raise ReefError(f"no hook for agent {agent!r}", f"the agents with hooks: {with_hooks}")
    raise typer.Exit(importlib.import_module(found.hook).main(list(ctx.args)))

"""`reef hook AGENT EVENT …`: the entry point an agent's installed hooks run.

Claude Code's ``settings.json`` runs ``reef hook claude-code session-start|user-prompt-submit
--config F`` with ``reef`` resolved when the hook runs (see adapters/claude_code/render.py),
so a moved or rebuilt venv does not leave an absolute interpreter path behind.
"""

from __future__ import annotations

import typer

HOOK_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True}


def hook(
    ctx: typer.Context,
    agent: str = typer.Argument(..., help="claude-code"),
) -> None:
    """Run an installed agent hook (called by the agent, not by people)."""
    from reef_cli.core.errors import ReefError

    if agent != "claude-code":
        raise ReefError(f"no hook for agent {agent!r}", "the agents with hooks: claude-code")
    from adapters.claude_code.hook import main

    raise typer.Exit(main(list(ctx.args)))

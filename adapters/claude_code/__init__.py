"""The Claude Code adapter: render a release into CLAUDE.md, skills/, commands/ and
settings.json hooks; run Claude Code through `reef serve`; harvest its transcripts.

This module is the agent's row only (read from the ``reef.adapters`` entry point, and
imported before the hook, which runs on every prompt: it stays light); the adapter is
``adapters.claude_code.adapter.ClaudeCodeAdapter``. See docs/adapters-claude-code.md.
"""

from __future__ import annotations

from reef_cli.core.agents import Agent

AGENT = Agent(
    name="claude-code",
    binary="claude",
    wrapper="reef-claude",
    label="Claude Code",
    package="npm install -g @anthropic-ai/claude-code",
    module="adapters.claude_code.adapter",
    attribute="ClaudeCodeAdapter",
    aliases=("claude",),
    hook="adapters.claude_code.hook",
    install="scripts/install_agents.sh (Claude Code)",
    marks=("projects/",),
)

"""The Codex CLI adapter: render a release into ``CODEX_HOME`` (AGENTS.md, skills/, the
``reef.config.toml`` profile with Reef's provider and hooks); run Codex through
`reef serve` with ``-p reef``; harvest its rollouts. See docs/adapters-codex.md.

This module is the agent's row only (read from the ``reef.adapters`` entry point, and
imported before the hook, which runs on every prompt: it stays light); the adapter is
``adapters.codex.adapter.CodexAdapter``.
"""

from __future__ import annotations

from reef_cli.core.agents import Agent

AGENT = Agent(
    name="codex",
    binary="codex",
    wrapper="reef-codex",
    label="Codex CLI",
    package="npm install -g @openai/codex",
    module="adapters.codex.adapter",
    attribute="CodexAdapter",
    hook="adapters.codex.hook",
    install="scripts/install_agents.sh (Codex CLI)",
    marks=("config.toml", "reef.config.toml"),
)

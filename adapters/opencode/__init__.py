"""The opencode adapter: render a release into opencode's config dir (AGENTS.md, skills/,
commands/, the ``reef`` provider in opencode.json(c)); run opencode through `reef serve`;
harvest its SQLite session store. See docs/adapters-opencode.md.

This module is the agent's row only (read from the ``reef.adapters`` entry point, so it
stays light); the adapter is ``adapters.opencode.adapter.OpenCodeAdapter``.
"""

from __future__ import annotations

from reef_cli.core.agents import Agent

AGENT = Agent(
    name="opencode",
    binary="opencode",
    wrapper="reef-opencode",
    label="opencode",
    package="npm install -g opencode-ai",
    module="adapters.opencode.adapter",
    attribute="OpenCodeAdapter",
    install="scripts/install_agents.sh (opencode)",
    marks=("opencode.json", "opencode.jsonc", "opencode.db"),
)

"""The agents Reef adapts, in one table: their adapter name, binary, wrapper and package.

Everything that lists or validates agents reads this table — the adapter lookup
(``adapters.get``), the server's ``adapter`` parameters, the install script, the wrappers,
the CLI's help — so a new agent is one row here plus its ``adapters/<package>/``.
``core`` cannot import ``adapters``: the row names the adapter class by module and
attribute, and ``adapters.get`` imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

AgentName = Literal["pi", "claude-code", "codex", "opencode"]


@dataclass(frozen=True)
class Agent:
    name: str  # the adapter name: --adapter, ?adapter=, the install ledger
    binary: str  # the executable (Reef's pinned copy in .tools/bin, else PATH)
    wrapper: str  # the console script that runs it through `reef serve`
    label: str  # how a person calls it
    package: str  # where a person gets it
    module: str  # the adapter class, imported by adapters.get
    attribute: str
    aliases: tuple[str, ...] = ()
    hook: str | None = None  # the module whose main(argv) `reef hook NAME …` runs, if any


AGENTS: tuple[Agent, ...] = (
    Agent(
        name="pi",
        binary="pi",
        wrapper="reef-pi",
        label="pi",
        package="npm install -g @earendil-works/pi-coding-agent",
        module="adapters.pi",
        attribute="PiAdapter",
    ),
    Agent(
        name="claude-code",
        binary="claude",
        wrapper="reef-claude",
        label="Claude Code",
        package="npm install -g @anthropic-ai/claude-code",
        module="adapters.claude_code",
        attribute="ClaudeCodeAdapter",
        aliases=("claude",),
        hook="adapters.claude_code.hook",
    ),
    Agent(
        name="codex",
        binary="codex",
        wrapper="reef-codex",
        label="Codex CLI",
        package="npm install -g @openai/codex",
        module="adapters.codex",
        attribute="CodexAdapter",
        hook="adapters.codex.hook",
    ),
    Agent(
        name="opencode",
        binary="opencode",
        wrapper="reef-opencode",
        label="opencode",
        package="npm install -g opencode-ai",
        module="adapters.opencode",
        attribute="OpenCodeAdapter",
    ),
)

NAMES: tuple[str, ...] = tuple(agent.name for agent in AGENTS)


def names_text(sep: str = ", ", last: str = " or ") -> str:
    """``pi, claude-code, codex or opencode`` for help texts and error messages."""
    return sep.join(NAMES[:-1]) + last + NAMES[-1]


def find(name: str) -> Agent | None:
    for agent in AGENTS:
        if name == agent.name or name in agent.aliases:
            return agent
    return None


def get(name: str) -> Agent:
    """The agent called ``name`` (or an alias); a clear error for anything else."""
    agent = find(name)
    if agent is None:
        from reef_cli.core.errors import ReefError

        raise ReefError(f"unknown adapter {name!r}", f"use one of: {names_text()}")
    return agent

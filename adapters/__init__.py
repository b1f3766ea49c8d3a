"""Agent adapters: render a release into an agent's own files and bring its sessions back.

``get(name)`` returns the adapter of any registered agent (the ``reef.adapters`` entry
points, read by ``reef_cli.core.agents``: Reef's own pi, claude-code, codex and opencode,
and any plugin's); ``install_release`` (``adapters._install``) is the one path that
resolves a release, installs it and records it in the install ledger.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from adapters.base import Adapter

__all__ = ["get", "names"]


def names() -> tuple[str, ...]:
    """Every registered agent's name."""
    from reef_cli.core import agents

    return agents.names()


def get(name: str) -> Adapter:
    """The adapter called ``name``; a clear error naming the registered ones otherwise."""
    from reef_cli.core import agents, plugins

    adapter: Adapter = plugins.load(agents.get(name).factory)()
    return adapter

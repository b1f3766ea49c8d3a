"""Agent adapters: render a release into an agent's own files and bring its sessions back.

``get("pi")`` / ``get("claude-code")`` / ``get("codex")`` / ``get("opencode")`` return an
adapter (the table is ``reef_cli.core.agents``); ``install_release`` (``adapters._install``)
is the one path that resolves a release, installs it and records it in the install ledger.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from reef_cli.core.agents import NAMES

if TYPE_CHECKING:
    from adapters.base import Adapter

__all__ = ["NAMES", "get"]


def get(name: str) -> Adapter:
    """The adapter called ``name``; a clear error for anything else."""
    from reef_cli.core import agents

    agent = agents.get(name)
    adapter: Adapter = getattr(importlib.import_module(agent.module), agent.attribute)()
    return adapter

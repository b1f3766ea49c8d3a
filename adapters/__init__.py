"""Agent adapters: render a release into an agent's own files and bring its sessions back.

``get("pi")`` / ``get("claude-code")`` return an adapter; ``install_release`` is the one
path that resolves a release, installs it and records it in the install ledger.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from adapters.base import Adapter

NAMES = ("pi", "claude-code")


def get(name: str) -> Adapter:
    """The adapter called ``name``; a clear error for anything else."""
    if name == "pi":
        from adapters.pi import PiAdapter

        return PiAdapter()
    if name in ("claude-code", "claude"):
        from adapters.claude_code import ClaudeCodeAdapter

        return ClaudeCodeAdapter()
    from reef_cli.core.errors import ReefError

    raise ReefError(f"unknown adapter {name!r}", f"use one of: {', '.join(NAMES)}")

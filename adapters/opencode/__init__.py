"""The opencode adapter: render a release into opencode's config dir (AGENTS.md, skills/,
commands/, the ``reef`` provider in opencode.json(c)); run opencode through `reef serve`;
harvest its SQLite session store. See docs/adapters-opencode.md.

Names are imported lazily, so importing the package costs nothing until it is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adapters._binary import AgentNotFound, AgentVersionUnsupported
    from adapters.opencode.adapter import NotInstalled, OpenCodeAdapter

__all__ = ["AgentNotFound", "AgentVersionUnsupported", "NotInstalled", "OpenCodeAdapter"]


def __getattr__(name: str) -> Any:
    if name in ("OpenCodeAdapter", "NotInstalled"):
        from adapters.opencode import adapter

        return getattr(adapter, name)
    if name in ("AgentNotFound", "AgentVersionUnsupported"):
        from adapters import _binary

        return getattr(_binary, name)
    raise AttributeError(f"module 'adapters.opencode' has no attribute {name!r}")

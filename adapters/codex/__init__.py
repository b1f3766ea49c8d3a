"""The Codex CLI adapter: render a release into ``CODEX_HOME`` (AGENTS.md, skills/, the
``reef.config.toml`` profile with Reef's provider and hooks); run Codex through
`reef serve` with ``-p reef``; harvest its rollouts. See docs/adapters-codex.md.

Names are imported lazily, so the hook (run on every prompt) starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adapters._binary import AgentNotFound as CodexNotFound
    from adapters._binary import AgentVersionUnsupported as CodexUnsupported
    from adapters.codex.adapter import CodexAdapter

__all__ = ["CodexAdapter", "CodexNotFound", "CodexUnsupported"]


def __getattr__(name: str) -> Any:
    if name == "CodexAdapter":
        from adapters.codex.adapter import CodexAdapter

        return CodexAdapter
    if name in ("CodexNotFound", "CodexUnsupported"):  # the shared errors, by their old names
        from adapters import _binary

        return _binary.AgentNotFound if name == "CodexNotFound" else _binary.AgentVersionUnsupported
    raise AttributeError(f"module 'adapters.codex' has no attribute {name!r}")

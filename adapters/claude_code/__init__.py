"""The Claude Code adapter: render a release into CLAUDE.md, skills/, commands/ and
settings.json hooks; run Claude Code through `reef serve`; harvest its transcripts.

Names are imported lazily, so the hook (run on every prompt) starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adapters._binary import AgentNotFound, AgentVersionUnsupported
    from adapters.claude_code.adapter import ClaudeCodeAdapter

__all__ = ["AgentNotFound", "AgentVersionUnsupported", "ClaudeCodeAdapter"]


def __getattr__(name: str) -> Any:
    if name == "ClaudeCodeAdapter":
        from adapters.claude_code.adapter import ClaudeCodeAdapter

        return ClaudeCodeAdapter
    if name in ("AgentNotFound", "AgentVersionUnsupported"):
        from adapters import _binary

        return getattr(_binary, name)
    raise AttributeError(f"module 'adapters.claude_code' has no attribute {name!r}")

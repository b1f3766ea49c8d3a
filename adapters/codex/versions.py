"""What ``$versions`` says inside Codex: Claude Code's texts (adapters/claude_code/versions.py)
with Codex's spelling of the command.

Codex's TUI answers any prompt that starts with ``/`` itself ("Unrecognized command
'/versions'"), so there the person types ``$versions`` (a skill mention, which reaches the
``UserPromptSubmit`` hook); ``codex exec "/versions"`` reaches the hook as it is, so both
spellings are understood.
"""

from __future__ import annotations

from typing import Any

from adapters.claude_code import versions as texts
from adapters.claude_code.versions import Request, UsageError

__all__ = ["COMMAND", "USAGE", "Request", "UsageError", "answer", "notice", "parse"]

COMMAND = "$versions"
ALSO = ("/versions",)
USAGE = texts.usage(COMMAND)


def parse(prompt: str) -> Request | None:
    """``$versions …`` or ``/versions …`` -> a request; None for any other prompt."""
    return texts.parse(prompt, COMMAND, ALSO)


def notice(scenario: str, installed: int | None) -> tuple[str | None, str]:
    """(update notice or None, context for the model) for a new session."""
    return texts.notice(scenario, installed, "Codex", COMMAND)


def install_text(config: dict[str, Any], spec: str, installed: int | None) -> str:
    """Install release ``spec`` into the same folder, with the same routing and model."""
    from adapters.codex.adapter import CodexAdapter

    adapter = CodexAdapter(binary=config.get("binary"), model=config.get("model"))
    return texts.install_text(
        config, spec, installed, adapter, "Codex reads AGENTS.md, skills and its profile"
    )


def answer(config: dict[str, Any], prompt: str, installed: int | None) -> str | None:
    """The text that answers a ``$versions`` prompt; None for any other prompt."""
    return texts.answer(config, prompt, installed, command=COMMAND, also=ALSO, install=install_text)

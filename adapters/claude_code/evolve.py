"""What ``/evolve <ask>`` does inside Claude Code: the hook files the ask from the session
(``core.asks.file_ask``, the format pi's extension writes) and answers before any model
call; `reef-claude evolve --filed` queues it on `reef serve`."""

from __future__ import annotations

import os
from typing import Any

COMMAND = "/evolve"
USAGE = "Usage: /evolve <what the agent should do differently>"


def answer(
    config: dict[str, Any], prompt: str, installed: int | None, event: dict[str, Any]
) -> str | None:
    """The text that answers an ``/evolve`` prompt; None for any other prompt."""
    from reef_cli.core.asks import file_ask

    text = prompt.strip()
    if not (text == COMMAND or text.startswith((COMMAND + " ", COMMAND + "\n"))):
        return None
    ask = text[len(COMMAND) :].strip()
    if not ask:
        return USAGE
    scenario = str(config["scenario"])
    session = event.get("session_id")  # Claude Code's: its records carry the same id
    path = file_ask(
        ask,
        scenario=scenario,
        agent="claude-code",
        installed_release=installed,
        session=session if isinstance(session, str) else None,
        transcript=event.get("transcript_path"),
        cwd=str(event.get("cwd") or os.getcwd()),
    )
    queue = "`reef-claude evolve --filed` queues it on reef serve"
    return f"Reef: saved your ask for {scenario} to {path}. {queue}."

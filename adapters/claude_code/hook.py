"""Claude Code hook entry point: ``reef hook claude-code EVENT --config F`` (also runnable
as ``python -P -m adapters.claude_code.hook EVENT --config F``).

``settings.json`` finds ``reef`` when the hook runs (render.hook_command), so a moved venv
does not break it. Claude Code runs it with the hook's JSON on stdin and reads JSON from
stdout:

- ``session-start`` (``SessionStart``; stdin has ``session_id``, ``transcript_path``,
  ``cwd``, ``source``): prints ``{"systemMessage": notice, "hookSpecificOutput":
  {"hookEventName": "SessionStart", "additionalContext": context}}``. Claude Code shows
  the ``systemMessage`` to the person ("SessionStart:startup says: …") and adds the
  context to the model's input. It also notes which release the session loaded
  (``reload.remember``).
- ``user-prompt-submit`` (``UserPromptSubmit``; stdin has ``prompt``, ``session_id``,
  ``cwd``): for ``/versions`` and ``/evolve <ask>`` (the ask filed, ``evolve.py``) prints
  ``{"decision": "block", "reason": text}`` — Claude Code shows the text and makes no
  model call. ``/reload`` (``reload.py``) adds the installed release as
  ``additionalContext`` and lets the prompt go on (or blocks when there is nothing new to
  load). Any other prompt gets no output and goes on as usual.

The frame (stdin, config, dispatch, never failing the session) is ``adapters._hook``;
this module gives it what only Claude Code needs (``started``: the session's release;
``respond``: ``/reload``'s context).
"""

from __future__ import annotations

import sys
from typing import Any

FAILED = (
    "/versions, /evolve or /reload failed ({}); try `reef-claude versions` or "
    "`reef-claude evolve`, or start a new session"
)


def _answer(
    config: dict[str, Any], prompt: str, installed: int | None, event: dict[str, Any]
) -> str | None:
    from adapters.claude_code import evolve, versions

    filed = evolve.answer(config, prompt, installed, event)
    return filed if filed is not None else versions.answer(config, prompt, installed)


def _reload(config: dict[str, Any], event: dict[str, Any]) -> dict[str, Any] | None:
    from adapters import _hook
    from adapters.claude_code import reload

    try:
        out = reload.answer(config, event)
    except Exception as exc:
        return {"decision": "block", "reason": _hook.visible(_hook._explain(exc, FAILED))}
    if out is not None and "reason" in out:
        out["reason"] = _hook.visible(out["reason"])
    if out is not None and "systemMessage" in out:
        out["systemMessage"] = _hook.visible(out["systemMessage"])
    return out


def _started(config: dict[str, Any], event: dict[str, Any]) -> None:
    from adapters.claude_code import reload

    if isinstance(config.get("target"), str):
        reload.remember(config, event)


def main(argv: list[str] | None = None) -> int:
    """``EVENT --config F``: read the event from stdin, answer it on stdout, exit 0."""
    from adapters import _hook
    from adapters.claude_code import versions

    return _hook.main(
        argv,
        prog="reef-claude-hook",
        notice=versions.notice,
        answer=_answer,
        failed=FAILED,
        started=_started,
        respond=_reload,
    )


if __name__ == "__main__":
    sys.exit(main())

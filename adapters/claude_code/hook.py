"""Claude Code hook entry point: ``reef hook claude-code EVENT --config F`` (also runnable
as ``python -P -m adapters.claude_code.hook EVENT --config F``).

``settings.json`` finds ``reef`` when the hook runs (render.hook_command), so a moved venv
does not break it. Claude Code runs it with the hook's JSON on stdin and reads JSON from
stdout:

- ``session-start`` (``SessionStart``; stdin has ``session_id``, ``transcript_path``,
  ``cwd``, ``source``): prints ``{"systemMessage": notice, "hookSpecificOutput":
  {"hookEventName": "SessionStart", "additionalContext": context}}``. Claude Code shows
  the ``systemMessage`` to the person ("SessionStart:startup says: …") and adds the
  context to the model's input.
- ``user-prompt-submit`` (``UserPromptSubmit``; stdin has ``prompt``, ``session_id``,
  ``cwd``): for ``/versions`` and ``/evolve <ask>`` (the ask filed, ``evolve.py``) prints
  ``{"decision": "block", "reason": text}`` — Claude Code shows the text and makes no
  model call; any other prompt gets no output and goes on as usual.

The frame (stdin, config, dispatch, never failing the session) is ``adapters._hook``.
"""

from __future__ import annotations

import sys
from typing import Any

FAILED = "/versions or /evolve failed ({}); try `reef-claude versions` or `reef-claude evolve`"


def main(argv: list[str] | None = None) -> int:
    from adapters import _hook
    from adapters.claude_code import evolve, versions

    def answer(
        config: dict[str, Any], prompt: str, installed: int | None, event: dict[str, Any]
    ) -> str | None:
        filed = evolve.answer(config, prompt, installed, event)
        return filed if filed is not None else versions.answer(config, prompt, installed)

    return _hook.main(
        argv, prog="reef-claude-hook", notice=versions.notice, answer=answer, failed=FAILED
    )


if __name__ == "__main__":
    sys.exit(main())

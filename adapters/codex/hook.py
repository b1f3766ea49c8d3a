"""Codex hook entry point: ``reef hook codex EVENT --config F`` (also runnable as
``python -P -m adapters.codex.hook EVENT --config F``).

Codex 0.171 runs a hook as ``$SHELL -lc COMMAND`` with the event's JSON on stdin and reads
JSON from stdout; the output schema is Claude Code's (verified against the binary's
embedded ``*.command.output`` schemas and a real run):

- ``session-start`` (``SessionStart``; stdin has ``session_id``, ``transcript_path``,
  ``cwd``, ``model``, ``source``): prints ``{"systemMessage": notice, "hookSpecificOutput":
  {"hookEventName": "SessionStart", "additionalContext": context}}``. The TUI shows the
  message ("↳ Hook · …"); the context reaches the model as a developer message.
- ``user-prompt-submit`` (``UserPromptSubmit``; stdin has ``prompt``): for ``$versions`` (or
  ``/versions``) prints ``{"decision": "block", "reason": text}``: the TUI shows "Blocked by
  hook" and the text, and no model call is made. Other prompts get no output.

The frame (stdin, config, dispatch, never failing the session) is ``adapters._hook``.
"""

from __future__ import annotations

import sys
from typing import Any

FAILED = "$versions failed ({}); try `reef-codex versions`"


def main(argv: list[str] | None = None) -> int:
    from adapters import _hook
    from adapters.codex import versions

    def answer(config: dict[str, Any], prompt: str, installed: int | None, _event: Any) -> Any:
        return versions.answer(config, prompt, installed)

    return _hook.main(
        argv, prog="reef hook codex", notice=versions.notice, answer=answer, failed=FAILED
    )


if __name__ == "__main__":
    sys.exit(main())

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

The hook never fails the person's session: it always exits 0, and a broken Reef state
becomes a short message instead of a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any


def _load_config(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _read_stdin() -> dict[str, Any]:
    try:
        data = json.loads(sys.stdin.read() or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _installed(target: Path) -> int | None:
    from adapters._files import load_manifest

    number = (load_manifest(target) or {}).get("release")
    return number if isinstance(number, int) and not isinstance(number, bool) else None


def _explain(exc: BaseException) -> str:
    from reef_cli.core.errors import ReefError

    if isinstance(exc, ReefError):
        return f"Reef: {exc.one_line()}"
    return f"Reef: $versions failed ({type(exc).__name__}: {exc}); try `reef-codex versions`"


def session_start(config: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    from adapters.codex import versions

    try:
        text, context = versions.notice(config["scenario"], _installed(Path(config["target"])))
    except Exception as exc:
        return {"systemMessage": _explain(exc)}
    out: dict[str, Any] = {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}
    }
    if text:
        out["systemMessage"] = text
    return out


def user_prompt_submit(config: dict[str, Any], event: dict[str, Any]) -> dict[str, Any] | None:
    from adapters.codex import versions

    prompt = event.get("prompt")
    if not isinstance(prompt, str):
        return None
    try:
        text = versions.answer(config, prompt, _installed(Path(config["target"])))
    except Exception as exc:
        text = _explain(exc)
    if text is None:
        return None
    return {"decision": "block", "reason": text}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="reef hook codex")
    parser.add_argument("event", choices=["session-start", "user-prompt-submit"])
    parser.add_argument("--config", required=True, type=Path)
    args = parser.parse_args(argv)
    event = _read_stdin()
    config = _load_config(args.config)
    if config is None:
        return 0  # Reef was uninstalled under a running session: stay out of the way
    if config.get("reef_home"):
        os.environ["REEF_HOME"] = str(config["reef_home"])
    handler = session_start if args.event == "session-start" else user_prompt_submit
    out = handler(config, event)
    if out is not None:
        sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The hooks Claude Code and Codex run (``SessionStart``, ``UserPromptSubmit``): the shell
command an install writes, the ``.reef/hook.json`` it reads, and the entry frame.

Both agents run a hook command with the event's JSON on stdin and read Claude Code's
output schema from stdout, so only the texts differ (``/versions`` or ``$versions``, the
agent's name). The hook never fails the person's session: it always exits 0, and a
broken Reef state becomes a short message instead of a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adapters import _files
from adapters.base import ReleaseToInstall, Routing

CONFIG = f"{_files.STATE_DIR}/hook.json"
#: Agent event -> the ``EVENT`` argument of ``reef hook AGENT EVENT``.
EVENTS = {"SessionStart": "session-start", "UserPromptSubmit": "user-prompt-submit"}
#: What a hook says when no `reef` command can be found at all (the venv moved or was
#: removed): a visible line at session start, and ``/versions`` blocked with the same text
#: (so it never goes to the model). Other prompts go on untouched.
MISSING = (
    "Reef: cannot find the `reef` command (the one recorded at install, {recorded}, is "
    "gone and there is none on PATH), so {versions} and update notices are off. Put `reef` "
    "on PATH or install again: reef harness install --adapter {adapter} --target {target}"
)

Notice = Callable[[str, int | None], tuple[str | None, str]]
# (config, prompt, installed release, the hook's event) -> the text that answers it, or
# None: the prompt goes to the model
Answer = Callable[[dict[str, Any], str, int | None, dict[str, Any]], str | None]


# ----------------------------------------------------------------- install side


def command(
    adapter: str, event_arg: str, config: Path, reef: str | None, *, versions: str, typed: str
) -> str:
    """The shell command the agent runs for one hook event: ``reef hook ADAPTER EVENT
    --config F`` with ``reef`` resolved when the hook runs.

    ``reef`` is looked up in order: ``$REEF_CLI`` (set by the wrapper to the running one),
    ``reef`` (the path recorded at install; None: this installation's) and ``reef`` on
    ``PATH``. A console script puts
    its own ``bin/`` (not the project the agent runs the hook in) first on ``sys.path``, so
    a project's own ``adapters`` package cannot shadow Reef's. With no `reef` at all, the
    session start shows ``MISSING`` and a prompt matching the ERE ``typed`` is blocked
    with it (``versions`` is how the message spells the command)."""
    from reef_cli.core import launcher

    reef = reef if reef is not None else (launcher.current_cli() or "")
    q = shlex.quote
    call = f"hook {adapter} {event_arg} --config {q(str(config))}"
    message = MISSING.format(
        recorded=reef or "(none)", versions=versions, adapter=adapter, target=config.parent.parent
    )
    if event_arg == "session-start":
        fallback = f"printf '%s\\n' {q(json.dumps({'systemMessage': message}))}"
    else:
        block = json.dumps({"decision": "block", "reason": message})
        fallback = (
            f'grep -Eq \'"prompt"[[:space:]]*:[[:space:]]*"[[:space:]]*{typed}\' && '
            f"printf '%s\\n' {q(block)}; exit 0"
        )
    return (
        f'R="${{{launcher.CLI_ENV}:-}}"; [ -f "$R" ] && [ -x "$R" ] || R={q(reef)}; '
        '[ -f "$R" ] && [ -x "$R" ] || R="$(command -v reef)"; '
        f'if [ -n "$R" ] && [ -x "$R" ]; then exec "$R" {call}; fi; {fallback}'
    )


def config_text(
    adapter: str,
    release: ReleaseToInstall,
    target: Path,
    routing: Routing,
    *,
    reef_home: Path,
    binary: str,
    reef: str,
    **extra: Any,
) -> str:
    """``.reef/hook.json``: what the hook needs (scenario, target, REEF_HOME, how to install
    again) without importing the adapter."""
    data = {
        "adapter": adapter,
        "scenario": release.scenario,
        "target": str(target),
        "reef_home": str(reef_home),
        "base_url": routing.base_url,
        "binary": binary,
        **extra,
        "reef_command": reef,
    }
    return json.dumps(data, indent=2) + "\n"


# ----------------------------------------------------------------- run side


def _load_config(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _read_stdin() -> dict[str, Any]:
    try:
        data = json.loads(sys.stdin.read() or "{}")
    except (ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _explain(exc: BaseException, failed: str) -> str:
    from reef_cli.core.errors import ReefError

    if isinstance(exc, ReefError):
        return f"Reef: {exc.one_line()}"
    return f"Reef: {failed.format(f'{type(exc).__name__}: {exc}')}"


def visible(text: str) -> str:
    """The agent prints hook text on the person's terminal, and it quotes the chain (a
    release's reason, gate details, diffs: anyone's text): control characters spelled out."""
    from reef_cli.core.controls import visible as spelled

    return spelled(text)


def session_start(config: dict[str, Any], notice: Notice, failed: str) -> dict[str, Any]:
    """``{"systemMessage": notice, "hookSpecificOutput": {…, "additionalContext": …}}``."""
    from adapters import _record

    try:
        text, context = notice(config["scenario"], _record.release_of(Path(config["target"])))
    except Exception as exc:
        return {"systemMessage": visible(_explain(exc, failed))}
    out: dict[str, Any] = {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}
    }
    if text:
        out["systemMessage"] = visible(text)
    return out


def user_prompt_submit(
    config: dict[str, Any], event: dict[str, Any], answer: Answer, failed: str
) -> dict[str, Any] | None:
    """``{"decision": "block", "reason": text}`` for a prompt Reef answers (``/versions``,
    Claude Code's ``/evolve``: the agent shows the text and makes no model call); None for
    any other prompt."""
    from adapters import _record

    prompt = event.get("prompt")
    if not isinstance(prompt, str):
        return None
    try:
        text = answer(config, prompt, _record.release_of(Path(config["target"])), event)
    except Exception as exc:
        text = _explain(exc, failed)
    if text is None:
        return None
    return {"decision": "block", "reason": visible(text)}


def main(
    argv: list[str] | None,
    *,
    prog: str,
    notice: Notice,
    answer: Answer,
    failed: str,
    started: Callable[[dict[str, Any], dict[str, Any]], None] | None = None,
    respond: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any] | None] | None = None,
) -> int:
    """``EVENT --config F``: read the event from stdin, answer it on stdout, exit 0.
    ``failed`` is the line for an unexpected error (``{}``: the error). An agent that
    needs more: ``started(config, event)`` hears each session start (Claude Code notes
    the release it loaded); ``respond(config, event)`` may answer a prompt with a whole
    hook answer (Claude Code's ``/reload``: context for the model) before ``answer``."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("event", choices=list(EVENTS.values()))
    parser.add_argument("--config", required=True, type=Path)
    args = parser.parse_args(argv)
    event = _read_stdin()
    config = _load_config(args.config)
    if config is None:
        return 0  # Reef was uninstalled under a running session: stay out of the way
    if config.get("reef_home"):
        os.environ["REEF_HOME"] = str(config["reef_home"])
    if args.event == "session-start":
        if started is not None:
            started(config, event)
        out: dict[str, Any] | None = session_start(config, notice, failed)
    else:
        out = respond(config, event) if respond is not None else None
        out = out or user_prompt_submit(config, event, answer, failed)
    if out is not None:
        sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    return 0

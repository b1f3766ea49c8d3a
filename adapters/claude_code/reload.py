"""What ``/reload`` does inside Claude Code: bring a running session onto the release now
installed in its folder, without a restart.

Claude Code reads CLAUDE.md, skills and commands only when a session starts, so after
``/versions N install`` (or a `reef harness install` elsewhere) a running session still
follows the old release. On ``/reload`` the UserPromptSubmit hook reads what is installed
(Reef's section of CLAUDE.md and Reef's skills and commands, from the folder itself) and
hands it to the session as ``additionalContext``, stating the release number and that it
replaces what was loaded at session start. Claude Code then sends ``/reload``'s command
text with it to the model, which is how the context enters the conversation; the hook
itself calls no model. The text is scanned for credentials first and never sent with one.

Which release a session has loaded is kept in ``.reef/sessions/<session id>.json``
(written when a session starts or resumes and by each ``/reload``), so an unchanged
install is answered in one line with no model call.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from adapters import _files

COMMAND = "/reload"
USAGE = "Usage: /reload (no arguments): loads the release installed here into this session"
SESSIONS = f"{_files.STATE_DIR}/sessions"
KEEP_DAYS = 30  # a session record older than this is dropped (a resumed session rewrites it)
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def is_reload(prompt: str) -> bool:
    text = prompt.strip()
    return text == COMMAND or text.startswith((COMMAND + " ", COMMAND + "\n"))


# ----------------------------------------------------------------- what a session loaded


def _installed(target: Path) -> dict[str, Any]:
    """``{"release", "content_hash"}`` of the install in ``target`` (``release`` None when
    there is none)."""
    manifest = _files.load_manifest(target) or {}
    return {"release": manifest.get("release"), "content_hash": manifest.get("content_hash")}


def _session_file(target: Path, event: dict[str, Any]) -> Path | None:
    sid = event.get("session_id")
    if not isinstance(sid, str) or not _SESSION_ID.fullmatch(sid):
        return None
    return target / SESSIONS / f"{sid}.json"


def _loaded(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write(path: Path | None, state: dict[str, Any]) -> None:
    from reef_cli.core.fsutil import atomic_write_text

    if path is None:
        return
    try:
        atomic_write_text(path, json.dumps(state) + "\n")
        cutoff = time.time() - KEEP_DAYS * 86400
        for old in path.parent.glob("*.json"):
            if old.stat().st_mtime < cutoff:
                old.unlink(missing_ok=True)
    except OSError:
        return  # only the "unchanged" shortcut is lost; /reload still works


def remember(config: dict[str, Any], event: dict[str, Any]) -> None:
    """At session start: note which release this session loaded. A new process (``startup``,
    ``resume``) reads CLAUDE.md afresh; after ``clear`` or ``compact`` what the session
    holds is not known (a /reload's context may be gone), so the note is dropped and the
    next /reload loads the release whatever it is."""
    target = Path(config["target"])
    where = _session_file(target, event)
    try:
        if event.get("source", "startup") in ("startup", "resume"):
            _write(where, _installed(target))
        elif where is not None:
            where.unlink(missing_ok=True)
    except OSError:
        return  # an unreadable install: /reload will say what is wrong


# ----------------------------------------------------------------- the answer


def _block(text: str) -> dict[str, Any]:
    return {"decision": "block", "reason": text}


def answer(config: dict[str, Any], event: dict[str, Any]) -> dict[str, Any] | None:
    """The hook's output for a ``/reload`` prompt; None for any other prompt.

    A block (shown to the person, no model call) when there is nothing to load; else
    ``additionalContext`` with the installed release, which goes to the model with the
    prompt."""
    from adapters.claude_code import reload_context
    from reef_cli.core.asks import check_outgoing

    prompt = event.get("prompt")
    if not isinstance(prompt, str) or not is_reload(prompt):
        return None
    if prompt.strip() != COMMAND:
        return _block(USAGE)
    target, scenario = Path(config["target"]), str(config["scenario"])
    now = _installed(target)
    number = now["release"]
    if not isinstance(number, int):
        return _block(f"Reef: nothing is installed in {target}, so there is nothing to reload.")
    where = _session_file(target, event)
    loaded = _loaded(where)
    if loaded == now:
        return _block(
            f'Reef: r{number} of "{scenario}" is installed, the release this session already '
            "follows; nothing to reload."
        )
    was = loaded.get("release") if loaded else None
    context = reload_context.text(target, scenario, number, was if isinstance(was, int) else None)
    check_outgoing("installed release", context)  # never hand a credential to the model
    _write(where, now)
    since = f" (it had r{was})" if isinstance(was, int) else ""
    return {
        "systemMessage": f'Reef: loaded r{number} of "{scenario}" into this session{since}.',
        "hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": context},
    }

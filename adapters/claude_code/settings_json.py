"""Merging Reef's hooks into Claude Code's ``settings.json`` without touching the person's.

Claude Code 2.1 reads hooks as::

    {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "...",
                                             "timeout": 30}]}],
               "UserPromptSubmit": [...]}}

Reef's entries are recognised by one of ``MARKS`` in their command (``MARK`` today, the
module path older installs ran), so re-installing replaces them and uninstalling removes
exactly them; every other key, group and hook stays.
"""

from __future__ import annotations

from typing import Any

from adapters._files import InstallError, dump_json, parse_json_object, person_json_object

#: In every hook command Reef writes: ``"$R" hook claude-code EVENT --config …``.
MARK = " hook claude-code "
MARKS = (MARK, "adapters.claude_code.hook")
EVENTS = ("SessionStart", "UserPromptSubmit")
REL = "settings.json"


def _is_reef(hook: Any) -> bool:
    return isinstance(hook, dict) and any(m in str(hook.get("command", "")) for m in MARKS)


def _hooks_of(data: dict[str, Any]) -> dict[str, Any]:
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise InstallError(
            f'{REL}: "hooks" must be an object of event -> list; nothing was installed',
            f'fix the "hooks" key in {REL}',
        )
    for event in EVENTS:
        groups = hooks.get(event, [])
        if not isinstance(groups, list):
            raise InstallError(
                f'{REL}: hooks["{event}"] must be a list; nothing was installed',
                f'fix hooks["{event}"] in {REL}',
            )
    return hooks


def _strip(hooks: dict[str, Any]) -> None:
    """Take Reef's hooks out of ``hooks`` in place, dropping groups/events left empty."""
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                inner = [h for h in group["hooks"] if not _is_reef(h)]
                if not inner and group["hooks"]:
                    continue  # a group that held only Reef's hooks
                group = {**group, "hooks": inner}
            kept.append(group)
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]


def merged(text: str | None, commands: dict[str, str], timeout: int = 30) -> str:
    """``settings.json`` text with Reef's hook for each event in ``commands`` (re)placed."""
    data = parse_json_object(text, f"{REL} in the Claude Code folder", REL)
    hooks = _hooks_of(data)
    _strip(hooks)
    for event, command in commands.items():
        entry = {"type": "command", "command": command, "timeout": timeout}
        hooks.setdefault(event, []).append({"hooks": [entry]})
    data["hooks"] = hooks
    return dump_json(data)


def unmerged(text: str) -> str | None:
    """``settings.json`` text without Reef's hooks; None when nothing else is left."""
    data = person_json_object(text)
    if data is None:
        return text
    hooks = data.get("hooks")
    if isinstance(hooks, dict):
        _strip(hooks)
        if not hooks:
            del data["hooks"]
    return dump_json(data) if data else None


def reef_commands(text: str) -> dict[str, list[str]]:
    """Reef's hook commands per event (for tests and `installed()`)."""
    data = parse_json_object(text, f"{REL} in the Claude Code folder", REL)
    out: dict[str, list[str]] = {}
    for event, groups in _hooks_of(data).items():
        for group in groups if isinstance(groups, list) else []:
            for hook in group.get("hooks", []) if isinstance(group, dict) else []:
                if _is_reef(hook):
                    out.setdefault(event, []).append(hook["command"])
    return out

"""What ``$versions`` says inside Codex: the chain, one release, or an install.

The release texts are Claude Code's (adapters/claude_code/versions.py: pure builders over
Reef's core); only the command differs. Codex's TUI answers any prompt that starts with
``/`` itself ("Unrecognized command '/versions'"), so there the person types
``$versions`` (a skill mention, which reaches the ``UserPromptSubmit`` hook); ``codex
exec "/versions"`` reaches the hook as it is, so both spellings are understood.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from adapters.claude_code import versions as texts
from adapters.claude_code.versions import Request, UsageError

__all__ = ["Request", "UsageError", "answer", "notice", "parse"]

COMMAND = "$versions"
USAGE = (
    "Usage: $versions (list releases) · $versions N (what changed and why) · "
    "$versions N install (install release N here)"
)
_SLASH = re.compile(r"(?<![\w/$])/versions\b")


def codex_words(text: str) -> str:
    """Claude Code's ``/versions`` hints in ``$versions`` form."""
    return _SLASH.sub(COMMAND, text)


def parse(prompt: str) -> Request | None:
    """``$versions …`` or ``/versions …`` -> a request; None for any other prompt."""
    text = prompt.strip()
    if text.startswith(COMMAND):
        text = "/" + text[1:]
    try:
        return texts.parse(text)
    except UsageError as exc:
        raise UsageError(codex_words(exc.message), USAGE) from exc


def notice(scenario: str, installed: int | None) -> tuple[str | None, str]:
    """(update notice or None, context for the model) for a new session."""
    from reef_cli.core import scenarios

    served = scenarios.get(scenario).chain().served()
    here = f"r{installed}" if installed else "no release"
    context = (
        f'Reef manages this Codex harness: scenario "{scenario}", {here} installed. '
        "The user can type $versions to list releases, $versions N to see what changed and "
        "why, and $versions N install to switch; those are answered without you."
    )
    if served is None or installed is None or served.number <= installed:
        return None, context
    number = served.number
    text = f"Reef r{installed} installed — r{number} available ($versions {number} install)"
    return text, context + f" {text}."


def install_text(config: dict[str, Any], spec: str, installed: int | None) -> str:
    """Install release ``spec`` into the same folder, with the same routing and model."""
    from adapters._install import release_to_install
    from adapters.base import Routing
    from adapters.codex.adapter import CodexAdapter
    from reef_cli.core import installs

    scenario = config["scenario"]
    target = Path(config["target"])
    release = release_to_install(scenario, spec, adapter="codex")
    if installed == release.number:
        return f'r{release.number} of "{scenario}" is already installed in {target}.'
    adapter = CodexAdapter(binary=config.get("binary"), model=config.get("model"))
    routing = Routing(base_url=config.get("base_url") or "http://127.0.0.1:8901", scenario=scenario)
    adapter.install(release, target, routing)
    installs.record(scenario, adapter.name, target, release.number, release.content_hash)
    was = f" (was r{installed})" if installed else ""
    return (
        f'Installed r{release.number} of "{scenario}" into {target}{was}.\n'
        "Codex reads AGENTS.md, skills and its profile when a session starts: "
        "start a new session to use it."
    )


def answer(config: dict[str, Any], prompt: str, installed: int | None) -> str | None:
    """The text that answers a ``$versions`` prompt; None for any other prompt."""
    request = parse(prompt)
    if request is None:
        return None
    scenario = config["scenario"]
    if request.action == "list":
        return codex_words(texts.list_text(scenario, installed))
    if request.action == "show":
        return codex_words(texts.show_text(scenario, str(request.spec), installed))
    return install_text(config, str(request.spec), installed)

"""Finding the Claude Code binary and checking that its version is one Reef was tested with."""

from __future__ import annotations

import os
import re
import subprocess
from functools import lru_cache

from reef_cli.core.errors import ReefError

#: Versions the adapter's layout (CLAUDE.md, skills/, commands/, settings.json hooks,
#: projects/<cwd>/<session>.jsonl) was verified against: 2.1.x (tests pin 2.1.332).
SUPPORTED = ((2, 1), (3, 0))  # >= 2.1, < 3.0
SUPPORTED_TEXT = ">= 2.1.0, < 3.0"


class AgentNotFound(ReefError):
    """The Claude Code binary is not installed (or not executable)."""

    http_status = 503


class AgentVersionUnsupported(ReefError):
    """The Claude Code binary's version is outside what this adapter supports."""

    http_status = 503


def find_binary(explicit: str | None = None) -> str:
    """The absolute path of ``claude``: ``explicit``, Reef's pinned copy, or ``PATH``."""
    from reef_cli.core import tools

    path = explicit or tools.find("claude")
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        where = f" at {explicit}" if explicit else " (looked in Reef's .tools/bin and PATH)"
        raise AgentNotFound(
            f"Claude Code is not installed{where}; nothing was changed",
            "install it with scripts/install_agents.sh (or `npm i -g @anthropic-ai/claude-code`)",
        )
    return path


def parse_version(text: str) -> tuple[int, int, int] | None:
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    if not found:
        return None
    major, minor, patch = (int(x) for x in found.groups())
    return major, minor, patch


@lru_cache(maxsize=8)
def _version_of(path: str, mtime_ns: int) -> str:
    try:
        done = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AgentNotFound(
            f"cannot run {path} --version ({exc}); nothing was changed",
            "reinstall Claude Code with scripts/install_agents.sh",
        ) from exc
    return (done.stdout or done.stderr).strip()


def check_version(path: str) -> tuple[int, int, int]:
    """The binary's version; ``AgentVersionUnsupported`` if Reef does not support it."""
    text = _version_of(path, os.stat(path).st_mtime_ns)
    version = parse_version(text)
    if version is None:
        raise AgentVersionUnsupported(
            f"{path} --version printed {text[:80]!r}, not a Claude Code version; "
            "nothing was changed",
            f"install Claude Code {SUPPORTED_TEXT} (scripts/install_agents.sh pins 2.1.332)",
        )
    low, high = SUPPORTED
    if not low <= version[:2] < high:
        shown = ".".join(map(str, version))
        raise AgentVersionUnsupported(
            f"Claude Code {shown} at {path} is not supported (Reef supports {SUPPORTED_TEXT}); "
            "nothing was changed",
            "install a supported version: scripts/install_agents.sh pins 2.1.332",
        )
    return version


def require(explicit: str | None = None) -> str:
    """Find the binary and check its version; returns its path."""
    path = find_binary(explicit)
    check_version(path)
    return path

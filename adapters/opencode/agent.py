"""Finding the opencode binary and checking its version is one Reef was verified against."""

from __future__ import annotations

import os
import re
import subprocess
from functools import lru_cache

from reef_cli.core.errors import ReefError

#: The layout this adapter writes (opencode.json(c) provider, AGENTS.md, skills/,
#: commands/, the SQLite session store) was verified on 1.18.33: >= 1.18, < 2.0.
SUPPORTED = ((1, 18), (2, 0))
SUPPORTED_TEXT = ">= 1.18.0, < 2.0"
PINNED = "1.18.33"
INSTALL_HINT = "install it with scripts/install_agents.sh (or `npm install -g opencode-ai`)"


class AgentNotFound(ReefError):
    """The opencode binary is not installed (or not executable)."""

    exit_code = 5
    http_status = 503


class AgentVersionUnsupported(ReefError):
    """The opencode binary's version is outside what this adapter supports."""

    exit_code = 5
    http_status = 503


def find_binary(explicit: str | None = None) -> str:
    """The absolute path of ``opencode``: ``explicit``, Reef's pinned copy, or ``PATH``."""
    from reef_cli.core import tools

    path = explicit or tools.find("opencode")
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        where = f" at {explicit}" if explicit else " (looked in Reef's .tools/bin and on PATH)"
        raise AgentNotFound(f"opencode is not installed{where}; nothing was changed", INSTALL_HINT)
    return str(os.path.abspath(path))


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``1.18.33`` (alone or inside a longer line) -> (1, 18, 33)."""
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    if not found:
        return None
    major, minor, patch = (int(x) for x in found.groups())
    return major, minor, patch


@lru_cache(maxsize=8)
def _version_of(path: str, mtime_ns: int) -> str:
    # no update check or model catalog fetch just to print a version
    env = {**os.environ, "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1"}
    try:
        done = subprocess.run(
            [path, "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AgentNotFound(
            f"cannot run {path} --version ({exc}); nothing was changed",
            "reinstall opencode with scripts/install_agents.sh",
        ) from exc
    return (done.stdout or done.stderr).strip()


def check_version(path: str) -> tuple[int, int, int]:
    """The binary's version; ``AgentVersionUnsupported`` if Reef does not support it."""
    text = _version_of(path, os.stat(path).st_mtime_ns)
    version = parse_version(text)
    if version is None:
        raise AgentVersionUnsupported(
            f"{path} --version printed {text[:80]!r}, not an opencode version; nothing was changed",
            f"install opencode {SUPPORTED_TEXT} (scripts/install_agents.sh pins {PINNED})",
        )
    low, high = SUPPORTED
    if not low <= version[:2] < high:
        shown = ".".join(map(str, version))
        raise AgentVersionUnsupported(
            f"opencode {shown} at {path} is not supported (Reef supports {SUPPORTED_TEXT}); "
            "nothing was changed",
            f"install a supported version: scripts/install_agents.sh pins {PINNED}",
        )
    return version


def require(explicit: str | None = None) -> tuple[str, tuple[int, int, int]]:
    """Find the binary and check its version; returns its path and version."""
    path = find_binary(explicit)
    return path, check_version(path)

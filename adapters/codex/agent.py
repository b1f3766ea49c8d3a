"""Finding the Codex CLI binary and checking that its version is one Reef was tested with.

``codex --version`` prints ``codex-cli 0.171.0``. Codex is still 0.x, so a minor release
may move files; the layout Reef writes (``reef.config.toml`` profile, ``AGENTS.md``,
``skills/``, hook trust hashes, ``sessions/YYYY/MM/DD/rollout-*.jsonl``) was verified
against 0.171.0 (docs/adapters-codex.md) and a 1.x is refused until it is checked.
"""

from __future__ import annotations

import os
import re
import subprocess
from functools import lru_cache

from reef_cli.core.errors import ReefError

PINNED = "0.171.0"  # what scripts/install_agents.sh installs
SUPPORTED = ((0, 171), (1, 0))  # >= 0.171, < 1.0
SUPPORTED_TEXT = ">= 0.171.0, < 1.0"
_VERSION = re.compile(r"(?:codex-cli\s+)?(\d+)\.(\d+)\.(\d+)")


class CodexNotFound(ReefError):
    """The Codex CLI binary is not installed (or not executable)."""

    http_status = 503


class CodexUnsupported(ReefError):
    """The Codex CLI binary's version is outside what this adapter supports."""

    http_status = 503


def find_binary(explicit: str | None = None) -> str:
    """The absolute path of ``codex``: ``explicit``, Reef's pinned copy, or ``PATH``."""
    from reef_cli.core import tools

    path = explicit or tools.find("codex")
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        where = f" at {explicit}" if explicit else " (looked in Reef's .tools/bin and PATH)"
        raise CodexNotFound(
            f"the Codex CLI is not installed{where}; nothing was changed",
            f"install it with scripts/install_agents.sh (or `npm i -g @openai/codex@{PINNED}`)",
        )
    return path


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``codex-cli 0.171.0`` -> ``(0, 171, 0)``; None for anything else."""
    found = _VERSION.search(text)
    if not found:
        return None
    major, minor, patch = (int(x) for x in found.groups())
    return major, minor, patch


@lru_cache(maxsize=8)
def _version_of(path: str, mtime_ns: int) -> str:
    try:
        done = subprocess.run(
            [path, "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CodexNotFound(
            f"cannot run {path} --version ({exc}); nothing was changed",
            "reinstall the Codex CLI with scripts/install_agents.sh",
        ) from exc
    return (done.stdout or done.stderr).strip()


def check_version(path: str) -> tuple[int, int, int]:
    """The binary's version; ``CodexUnsupported`` if Reef does not support it."""
    text = _version_of(path, os.stat(path).st_mtime_ns)
    version = parse_version(text)
    if version is None:
        raise CodexUnsupported(
            f"{path} --version printed {text[:80]!r}, not a Codex CLI version; nothing was changed",
            f"install the Codex CLI {SUPPORTED_TEXT} (scripts/install_agents.sh pins {PINNED})",
        )
    low, high = SUPPORTED
    if not low <= version[:2] < high:
        shown = ".".join(map(str, version))
        raise CodexUnsupported(
            f"Codex CLI {shown} at {path} is not supported (Reef supports {SUPPORTED_TEXT}); "
            "nothing was changed",
            f"install a supported version: scripts/install_agents.sh pins {PINNED}",
        )
    return version


def require(explicit: str | None = None) -> str:
    """Find the binary and check its version; returns its path."""
    path = find_binary(explicit)
    check_version(path)
    return path

"""Finding an agent's binary and checking that its version is one Reef was verified with.

Each adapter describes its binary once (an ``AgentBinary``); finding it, running
``--version`` (cached per binary and modification time), the supported range and the
errors are the same for every agent, so a new agent adds facts, not code.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from reef_cli.core.errors import ReefError

Version = tuple[int, int, int]
VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


class AgentNotFound(ReefError):
    """An agent's binary is not installed (or not executable)."""

    exit_code = 5
    http_status = 503


class AgentVersionUnsupported(ReefError):
    """An agent's binary is a version Reef does not support (or does not say which)."""

    exit_code = 5
    http_status = 503


@dataclass(frozen=True)
class Found:
    """A binary that passed the check: where it is and its version."""

    path: str
    version: Version

    @property
    def version_text(self) -> str:
        return ".".join(map(str, self.version))


@dataclass(frozen=True)
class AgentBinary:
    """What Reef knows of one agent's executable."""

    tool: str  # the name in Reef's .tools/bin or on PATH (reef_cli.core.tools.find)
    name: str  # in messages: "Claude Code 3.0.1 at … is not supported"
    supported: tuple[tuple[int, int], tuple[int, int]]  # (major, minor): >= low, < high
    pinned: str  # what scripts/install_agents.sh installs
    install: str  # the package manager's command, for the hint
    label: str = ""  # at the start of a sentence, when not ``name`` ("the Codex CLI")
    version_env: Mapping[str, str] = field(default_factory=dict)  # for ``--version`` only
    requires: str = ""  # what the binary needs to run, said when ``--version`` fails

    @property
    def subject(self) -> str:
        return self.label or self.name

    @property
    def supported_text(self) -> str:
        (low, low_minor), (high, high_minor) = self.supported
        return f">= {low}.{low_minor}.0, < {high}.{high_minor}"

    def with_tool(self, tool: str) -> AgentBinary:
        """The same agent under another executable name (``pi-0.73``)."""
        return dataclasses.replace(self, tool=tool)

    def find(self, explicit: str | None = None) -> str:
        """The absolute path of the binary: ``explicit``, Reef's pinned copy, or ``PATH``."""
        from reef_cli.core import tools

        path = explicit or tools.find(self.tool)
        if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
            where = (
                f" at {explicit}"
                if explicit
                else f" (looked for `{self.tool}` in {tools.tools_bin()} and on PATH)"
            )
            raise AgentNotFound(
                f"{self.subject} is not installed{where}; nothing was changed",
                f"install it with scripts/install_agents.sh (or `{self.install}`)",
            )
        return os.path.abspath(path)

    def check_version(self, path: str) -> Version:
        """The binary's version; ``AgentVersionUnsupported`` if Reef does not support it."""
        env = tuple(sorted(self.version_env.items()))
        try:
            code, text = _version_output(path, os.stat(path).st_mtime_ns, env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise AgentNotFound(
                f"cannot run {path} --version ({exc}); nothing was changed",
                f"reinstall {self.subject} with scripts/install_agents.sh",
            ) from exc
        version = parse_version(text) if code == 0 else None
        if version is None:
            article = "an" if self.name[:1].lower() in "aeiou" else "a"
            said = (
                f"printed {text[:80]!r}, not {article} {self.name} version"
                if code == 0
                else f"failed (exit {code}: {(text.splitlines() or ['no output'])[-1][:80]!r})"
            )
            needs = f"; {self.requires}" if self.requires else ""
            raise AgentVersionUnsupported(
                f"{path} --version {said}; nothing was changed",
                f"install {self.subject} {self.supported_text} "
                f"(scripts/install_agents.sh pins {self.pinned}){needs}",
            )
        low, high = self.supported
        if not low <= version[:2] < high:
            shown = ".".join(map(str, version))
            raise AgentVersionUnsupported(
                f"{self.name} {shown} at {path} is not supported "
                f"(Reef supports {self.supported_text}); nothing was changed",
                f"install a supported version: scripts/install_agents.sh pins {self.pinned}",
            )
        return version

    def require(self, explicit: str | None = None) -> Found:
        """Find the binary and check its version."""
        path = self.find(explicit)
        return Found(path, self.check_version(path))


def parse_version(text: str) -> Version | None:
    """The first ``X.Y.Z`` in ``text`` (``codex-cli 0.171.0``); None when there is none."""
    found = VERSION.search(text)
    if not found:
        return None
    major, minor, patch = (int(x) for x in found.groups())
    return major, minor, patch


@lru_cache(maxsize=16)
def _version_output(path: str, mtime_ns: int, env: tuple[tuple[str, str], ...]) -> tuple[int, str]:
    """``path --version``: its exit code and what it printed (some print on stderr)."""
    done = subprocess.run(
        [path, "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **dict(env)} if env else None,
    )
    return done.returncode, "\n".join(s.strip() for s in (done.stdout, done.stderr) if s.strip())

"""Find and check the pi binary, and run pi once, headless, in print mode."""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from adapters.pi.errors import PiNotFound, PiUnsupported

MIN_VERSION = (0, 73, 0)
MAX_MAJOR = 1  # 1.x is the newest line Reef is tested against
QUIET_ENV = {
    "PI_OFFLINE": "1",  # no model-catalog refresh or other startup network use
    "PI_SKIP_VERSION_CHECK": "1",  # no pi.dev latest-version request
    "PI_TELEMETRY": "0",
}
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_cache: dict[tuple[str, float], tuple[int, int, int]] = {}


@dataclass(frozen=True)
class PiBinary:
    path: str
    version: tuple[int, int, int]

    @property
    def version_text(self) -> str:
        return ".".join(map(str, self.version))


def find(binary: str | None = None, tool: str = "pi") -> str:
    """``binary`` if given, else Reef's pinned ``tool`` (``pi`` or ``pi-0.73``), else PATH."""
    from reef_cli.core import tools

    if binary:
        path = Path(binary)
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
        raise PiNotFound(
            f"pi binary {binary} does not exist or is not executable",
            "point at an installed pi, or run scripts/install_agents.sh",
        )
    found = tools.find(tool)
    if found is None:
        raise PiNotFound(
            f"cannot find the `{tool}` binary (looked in {tools.tools_bin()} and on PATH)",
            "run scripts/install_agents.sh, or `npm install -g @earendil-works/pi-coding-agent`",
        )
    return found


def version_of(path: str, timeout: float = 30) -> tuple[int, int, int]:
    """``pi --version`` parsed; cached per binary and modification time."""
    key = (path, os.stat(path).st_mtime)
    if key in _cache:
        return _cache[key]
    try:
        done = subprocess.run(
            [path, "--version"],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **QUIET_ENV},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PiUnsupported(
            f"`{path} --version` failed ({exc})", "reinstall pi (scripts/install_agents.sh)"
        ) from exc
    # 1.x prints the version on stdout, 0.73 on stderr
    match = _VERSION.search(done.stdout + done.stderr) if done.returncode == 0 else None
    if match is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise PiUnsupported(
            f"`{path} --version` did not print a version (exit {done.returncode}: {tail[0]})",
            "reinstall pi (scripts/install_agents.sh); pi needs node >= 20 (1.x: >= 22.19)",
        )
    version = (int(match[1]), int(match[2]), int(match[3]))
    _cache[key] = version
    return version


def check(binary: str | None = None, tool: str = "pi") -> PiBinary:
    """The pi binary to use, verified to be a supported version."""
    path = find(binary, tool)
    version = version_of(path)
    if version < MIN_VERSION or version[0] > MAX_MAJOR:
        text = ".".join(map(str, version))
        raise PiUnsupported(
            f"pi {text} at {path} is not supported (Reef supports pi 0.73 up to 1.x)",
            "install a supported pi: scripts/install_agents.sh pins 1.6 and 0.73",
        )
    return PiBinary(path, version)


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    started: float
    timed_out: bool


def run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> Run:
    """Run pi to completion (stdin closed); on timeout kill its whole process group."""
    from adapters._process import run_group

    started = time.time()
    done = run_group(argv, cwd, env, timeout)
    return Run(done.returncode, done.stdout, done.stderr, started, done.timed_out)

"""pi's binary (the versions Reef supports) and running pi once, headless, in print mode."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from adapters._binary import AgentBinary

QUIET_ENV = {
    "PI_OFFLINE": "1",  # no model-catalog refresh or other startup network use
    "PI_SKIP_VERSION_CHECK": "1",  # no pi.dev latest-version request
    "PI_TELEMETRY": "0",
}
#: pi 0.73 up to 1.x; ``BINARY.with_tool("pi-0.73")`` is the older pinned copy.
BINARY = AgentBinary(
    tool="pi",
    name="pi",
    supported=((0, 73), (2, 0)),
    pinned="1.6.0 and 0.73.1",
    install="npm install -g @earendil-works/pi-coding-agent",
    version_env=QUIET_ENV,
    requires="pi needs node >= 20 (1.x: >= 22.19)",
)


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

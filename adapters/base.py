"""What every agent adapter provides, and the data it hands back.

An adapter turns a release into an agent's own files (``install``), takes them out again
leaving the person's files as they were (``uninstall``), says what is installed, builds
the command that runs the agent through ``reef serve`` (``wrapper``), reads the agent's
own session transcripts back (``harvest``) and runs the agent headless on a tree
(``run_headless``): the one way a trial or a task run starts an agent. The caller says
*how* the process runs through a ``Launch`` (recipes pass a sandboxed one), so adapters
stay free of the sandbox.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class ReleaseToInstall:
    """A release as adapters need it: its files plus where it came from."""

    scenario: str
    number: int
    files: dict[str, str]
    content_hash: str
    latest: int | None = None


@dataclass(frozen=True)
class Routing:
    """How the agent reaches `reef serve`."""

    base_url: str  # e.g. http://127.0.0.1:8901 (no /v1)
    scenario: str
    token_env: str = "REEF_TOKEN"
    session_env: str = "REEF_SESSION_ID"


@dataclass
class ToolCall:
    name: str
    arguments: Any = None


@dataclass
class Turn:
    role: str  # user | assistant | tool
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    timestamp: str | None = None
    model: str | None = None


@dataclass
class Session:
    """One agent session parsed from the agent's own transcript."""

    agent: str
    session_id: str
    path: str
    cwd: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    model: str | None = None
    turns: list[Turn] = field(default_factory=list)
    skills_used: list[str] = field(default_factory=list)
    receipts: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


@dataclass
class Transcript:
    """What a headless run produced: exit code, output and the parsed session if any.

    ``session_id`` is the Reef session the run's model calls were recorded under (sent as
    ``x-reef-session``); ``isolation`` says how the process ran (``bwrap`` or ``none``)."""

    returncode: int
    stdout: str
    stderr: str
    session: Session | None = None
    timed_out: bool = False
    session_id: str | None = None
    isolation: str = "none"
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


@dataclass(frozen=True)
class Gateway:
    """The `reef serve` a headless run talks to: where, as which scenario, with which
    token, asking for which model id."""

    base_url: str  # no /v1
    scenario: str
    token: str
    model: str = "default"


@dataclass(frozen=True)
class HeadlessJob:
    """One headless run to prepare: install ``release`` (the files, as release 0) into the
    fresh agent folder ``target``, routed through ``gateway``, and run the agent once on
    ``prompt``; ``isolated``: the caller's ``Launch`` isolates the process."""

    release: ReleaseToInstall
    target: Path
    routing: Routing
    gateway: Gateway
    prompt: str
    isolated: bool = False


@dataclass
class HeadlessRun:
    """How one headless run starts: the agent's argv and its own environment (laid over a
    bare ``PATH`` and ``LANG``: nothing else is inherited), the Reef session its model
    calls go under, and how to find the session it wrote afterwards
    (``session_of(started)``, ``started`` a ``time.time()``)."""

    argv: list[str]
    env: dict[str, str]
    session_id: str
    session_of: Callable[[float], Session | None]


@dataclass
class Exit:
    """How a launched process ended."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    isolation: str = "none"


class Launch(Protocol):
    """Runs ``argv`` in ``workdir`` with exactly ``env`` (nothing inherited), stdin closed,
    killed with its children after ``timeout`` seconds (then ``timed_out``)."""

    def __call__(
        self, argv: list[str], workdir: Path, env: dict[str, str], timeout: float
    ) -> Exit: ...


class Adapter(abc.ABC):
    name: str

    @abc.abstractmethod
    def default_target(self) -> Path:
        """The agent's own config folder (e.g. ``~/.pi/agent``)."""

    @abc.abstractmethod
    def install(self, release: ReleaseToInstall, target: Path, routing: Routing) -> None:
        """Render ``release`` into ``target``; all or nothing."""

    @abc.abstractmethod
    def uninstall(self, target: Path) -> None:
        """Remove what ``install`` wrote; the person's own files come back byte for byte."""

    @abc.abstractmethod
    def installed(self, target: Path) -> dict[str, Any] | None:
        """The install record in ``target`` (scenario, release, content hash), if any."""

    @abc.abstractmethod
    def wrapper(
        self, target: Path, routing: Routing, argv: list[str]
    ) -> tuple[list[str], dict[str, str]]:
        """The argv and extra environment that run the agent through `reef serve`."""

    @abc.abstractmethod
    def harvest(self, target: Path, since: datetime | None = None) -> list[Session]:
        """Sessions from the agent's transcripts, newest last."""

    def notice(self, target: Path) -> str | None:
        """A line the wrapper prints before the agent starts (an update is waiting), for
        agents that cannot show one themselves; None: nothing to say, or the agent's own
        extension or hook says it (pi, Claude Code, Codex)."""
        return None

    @abc.abstractmethod
    def agent_version(self) -> str:
        """The agent binary's version (``1.6.2``); raises when it is missing or unsupported."""

    def run_headless(
        self,
        files: dict[str, str],
        prompt: str,
        workdir: Path,
        gateway: Gateway,
        *,
        launch: Launch | None = None,
        timeout: float = 300.0,
    ) -> Transcript:
        """Install ``files`` into a fresh agent folder inside ``workdir``, run the agent
        once on ``prompt`` in ``workdir`` through ``gateway`` and return what it printed.
        ``launch`` runs the process (default: a plain child process); the agent's model
        calls are recorded under ``Transcript.session_id``. The same for every agent: what
        differs is in ``prepare_headless``."""
        from adapters._process import headless_job, launch_run

        workdir = Path(workdir).absolute()
        job = headless_job(files, prompt, workdir, gateway, isolated=launch is not None)
        return launch_run(self.prepare_headless(job), workdir, timeout, launch)

    @abc.abstractmethod
    def prepare_headless(self, job: HeadlessJob) -> HeadlessRun:
        """Install ``job.release`` into ``job.target`` and say how to run the agent once
        on ``job.prompt`` there."""

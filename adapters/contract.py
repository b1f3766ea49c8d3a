"""The values that cross the adapter seam: a release to install, how the agent reaches
`reef serve`, the sessions and transcripts an adapter hands back, and how a headless run
is prepared and launched. ``adapters.base`` re-exports them beside ``Adapter``; they live
apart so the headless runner (``_process``) uses them without importing ``Adapter``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
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
    # the session its model calls were recorded under (what `reef sessions` joins on):
    # the ``x-reef-session`` they carried, or the agent's own id where the agent sends it
    # as its session header (Claude Code); None: not known
    reef_session_id: str | None = None

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

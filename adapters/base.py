"""What every agent adapter provides, and the data it hands back.

An adapter turns a release into an agent's own files (``install``), takes them out again
leaving the person's files as they were (``uninstall``), says what is installed, builds
the command that runs the agent through ``reef serve`` (``wrapper``), reads the agent's
own session transcripts back (``harvest``) and runs the agent headless on a tree
(``run_headless``): the one way a trial or a task run starts an agent. The caller says
*how* the process runs through a ``Launch`` (recipes pass a sandboxed one), so adapters
stay free of the sandbox. The data types live in ``adapters.contract``, re-exported here.
"""

from __future__ import annotations

import abc
from datetime import datetime
from pathlib import Path
from typing import Any

from adapters._process import headless_job, launch_run
from adapters.contract import (
    Exit,
    Gateway,
    HeadlessJob,
    HeadlessRun,
    Launch,
    ReleaseToInstall,
    Routing,
    Session,
    ToolCall,
    Transcript,
    Turn,
)

__all__ = [
    "Adapter",
    "Exit",
    "Gateway",
    "HeadlessJob",
    "HeadlessRun",
    "Launch",
    "ReleaseToInstall",
    "Routing",
    "Session",
    "ToolCall",
    "Transcript",
    "Turn",
]


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
        workdir = Path(workdir).absolute()
        job = headless_job(files, prompt, workdir, gateway, isolated=launch is not None)
        return launch_run(self.prepare_headless(job), workdir, timeout, launch)

    @abc.abstractmethod
    def prepare_headless(self, job: HeadlessJob) -> HeadlessRun:
        """Install ``job.release`` into ``job.target`` and say how to run the agent once
        on ``job.prompt`` there."""

"""What the agents' end-to-end tests share: skipping when a pinned binary is missing, a
person's machine to run the agent on (a temp HOME, the agent's folder, a project), and a
`reef` that moved or is gone."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from adapters._install import install_release
from adapters.base import Adapter, Routing
from reef_cli.core import agents, tools
from tests.e2e.conftest import ReefServer


def needs(tool: str, agent: str) -> pytest.MarkDecorator:
    """Skip (with a visible reason) where Reef's pinned ``tool`` is not installed."""
    return pytest.mark.skipif(
        tools.find(tool) is None,
        reason=f"{agent} is not installed (run scripts/install_agents.sh)",
    )


def params(names: Iterable[str] | None = None) -> list[Any]:
    """One ``pytest.param`` per agent of ``reef_cli.core.agents``, each skipped (with the
    reason shown) where its pinned binary is missing: for tests parametrised by agent."""
    return [
        pytest.param(name, marks=needs(agents.get(name).binary, agents.get(name).label), id=name)
        for name in (agents.names() if names is None else names)
    ]


def run(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run an agent to completion, stdin closed, with exactly ``env``."""
    return subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


class Rig:
    """One person's machine: a temp HOME, the agent's folder (``target``), a project."""

    def __init__(self, tmp: Path, reef: ReefServer, adapter: Adapter, target: str, scenario: str):
        self.home = tmp / "home"
        self.target = tmp / target
        self.work = tmp / "project"
        for folder in (self.home, self.target, self.work):
            folder.mkdir(parents=True, exist_ok=True)
        self.reef = reef
        self.routing = Routing(base_url=reef.url, scenario=scenario)
        self.adapter = adapter

    def install(self, release: str) -> None:
        install_release(
            self.adapter.name, self.routing.scenario, self.routing, release, self.target
        )

    def env(self) -> dict[str, str]:
        """The person's environment: nothing of the test runner's but ``PATH``."""
        return {"PATH": os.environ["PATH"], "HOME": str(self.home), "LANG": "C.UTF-8"}

    def wrapped(
        self, args: list[str], env: dict[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """What the wrapper (`reef-<agent> ARGS`) runs, in the project, over ``env``."""
        argv, extra = self.adapter.wrapper(self.target, self.routing, args)
        return run(argv, self.work, {**env, **extra}, timeout)


def path_without_reef() -> str:
    """``PATH`` with every folder that holds a `reef` left out."""
    return os.pathsep.join(
        d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "reef").exists()
    )


def moved_reef(tmp: Path) -> tuple[Path, Path]:
    """(this Reef's `reef`, a `reef` in ``tmp/old-venv`` that runs it). Install with the
    second recorded, then rename ``tmp/old-venv``: the recorded one is gone."""
    real = Path(sys.executable).parent / "reef"
    old = tmp / "old-venv" / "bin" / "reef"
    old.parent.mkdir(parents=True)
    old.write_text(f'#!/bin/sh\nexec {real} "$@"\n')
    old.chmod(0o755)
    return real, old

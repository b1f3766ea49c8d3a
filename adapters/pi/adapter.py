"""The pi adapter's class: Reef releases in pi's agent dir, pi routed through `reef serve`.

::

    adapter = PiAdapter()                       # pinned pi 1.6; PiAdapter(tool="pi-0.73")
    adapter.install(release, target, routing)   # rules, skills, prompts, extensions, models.json
    argv, env = adapter.wrapper(target, routing, ["-p", "hello"])
    transcript = adapter.run_installed("fix the bug", workdir, target, routing)
    transcript = adapter.run_headless(files, "fix the bug", workdir, gateway, launch=…)
    sessions = adapter.harvest(target)

See docs/adapters-pi.md.
"""

from __future__ import annotations

import os
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from adapters import _files, _models, _record
from adapters._binary import Found
from adapters.base import (
    Adapter,
    HeadlessJob,
    HeadlessRun,
    ReleaseToInstall,
    Routing,
    Session,
    Transcript,
)
from adapters.pi import harvest as _harvest
from adapters.pi import headless, models_json, render
from adapters.pi.errors import InstallError, NotInstalled, PiNotFound, PiUnsupported
from adapters.pi.harvest import PiSession
from reef_cli.core import launcher

__all__ = [
    "InstallError",
    "NotInstalled",
    "PiAdapter",
    "PiNotFound",
    "PiSession",
    "PiUnsupported",
]


class PiAdapter(Adapter):
    name = "pi"

    def __init__(
        self,
        binary: str | None = None,
        tool: str = "pi",
        models: list[str] | None = None,
        discover_models: bool = True,
    ) -> None:
        """``binary``: an explicit pi executable; else ``tool`` via ``reef_cli.core.tools``
        (``pi`` = pinned 1.6, ``pi-0.73``). ``models``: the model ids the ``reef`` provider
        lists; when None, install asks `reef serve` (``GET /v1/models``, 2 s) and falls
        back to ``["default"]``."""
        self.binary = binary
        self.tool = tool
        self.models = list(models) if models else None
        self.discover_models = discover_models

    # ----------------------------------------------------------------- where

    def default_target(self) -> Path:
        override = os.environ.get("PI_CODING_AGENT_DIR")
        if override:
            return Path(override).expanduser()
        return Path.home() / ".pi" / "agent"

    # ----------------------------------------------------------------- install

    def install(self, release: ReleaseToInstall, target: Path, routing: Routing) -> None:
        target = Path(target).expanduser().absolute()
        self._install(release, target, routing, self._models_for(target, routing))

    def _install(
        self, release: ReleaseToInstall, target: Path, routing: Routing, models: list[str]
    ) -> None:
        from reef_cli.core import paths, tokens

        plan = render.plan(
            release,
            target,
            routing,
            models=models,
            reef_home=paths.state_dir().absolute(),
            token_file=tokens.token_path().absolute(),
        )
        _files.apply(plan)

    def _models_for(self, target: Path, routing: Routing) -> list[str]:
        return _models.choose(
            self.models,
            routing,
            discover=self.discover_models,
            installed=lambda: models_json.installed_models(target),
        )

    def uninstall(self, target: Path) -> None:
        target = Path(target).expanduser().absolute()
        removed = _files.remove(
            target,
            {render.AGENTS: _files.unsection, models_json.REL: models_json.unmerged},
        )
        if not removed:
            raise NotInstalled(
                f"Reef is not installed in {target}",
                "nothing to remove; `reef harness install --adapter pi` installs it",
            )

    def installed(self, target: Path) -> dict[str, Any] | None:
        manifest = _files.load_manifest(Path(target).expanduser())
        if manifest is None or manifest.get("adapter") != "pi":
            return None
        keys = ("scenario", "release", "content_hash", "latest", "base_url", "models")
        record = {k: manifest.get(k) for k in keys} | {"target": str(target)}
        record["reef_command"] = manifest.get("reef_command") or _recorded_command(target)
        return record

    # ----------------------------------------------------------------- run

    def check_binary(self) -> Found:
        """The pi binary, verified (PiNotFound / PiUnsupported otherwise)."""
        return headless.BINARY.with_tool(self.tool).require(self.binary)

    def wrapper(
        self, target: Path, routing: Routing, argv: list[str]
    ) -> tuple[list[str], dict[str, str]]:
        """``(argv, env)`` that run pi on ``target`` through `reef serve`.

        ``argv`` is pi's own arguments (``["-p", "hi"]``, ``[]`` for the TUI). The env is
        *extra* environment to lay over the caller's: ``PI_CODING_AGENT_DIR``, a fresh
        ``REEF_SESSION_ID`` (sent as ``x-reef-session``) and ``REEF_CLI`` (the `reef` the
        extension runs). ``--provider reef --model M`` is
        added unless ``argv`` already picks a model."""
        target = Path(target).expanduser().absolute()
        if self.installed(target) is None:
            raise _record.not_installed(target, self.name, routing.scenario)
        binary = self.check_binary()
        models = models_json.installed_models(target)
        if not models:
            raise InstallError(
                f"{target / models_json.REL} has no `reef` provider (edited since the install?)",
                "install again: `reef harness install --adapter pi`",
            )
        picks = {"--model", "--models", "--provider", "--list-models"}
        prefix = (
            [] if picks & set(argv) else ["--provider", models_json.PROVIDER, "--model", models[0]]
        )
        env = {
            "PI_CODING_AGENT_DIR": str(target),
            routing.session_env: str(uuid.uuid4()),
            **launcher.agent_env(),  # the extension runs this `reef`, wherever the venv is now
        }
        return [binary.path, *prefix, *argv], env

    def agent_version(self) -> str:
        return self.check_binary().version_text

    def prepare_headless(self, job: HeadlessJob) -> HeadlessRun:
        """``pi -p PROMPT``, installed into the agent dir ``job.target``."""
        target, routing = job.target, job.routing
        self._install(job.release, target, routing, [job.gateway.model])
        argv, extra = self.wrapper(target, routing, ["-p", job.prompt])
        env = {
            **headless.QUIET_ENV,
            "REEF_PI_NOTICE": "0",
            **extra,
            routing.token_env: job.gateway.token,
        }
        sid = extra[routing.session_env]
        return HeadlessRun(argv, env, sid, lambda t: self._session_of(target, sid, t))

    def run_installed(
        self,
        prompt: str,
        workdir: Path,
        target: Path,
        routing: Routing,
        env: dict[str, str] | None = None,
        timeout: float = 300,
        extra_args: list[str] | None = None,
    ) -> Transcript:
        """Run ``pi -p PROMPT`` once in ``workdir`` and return what it printed plus the
        session it wrote (``Transcript.session``, a :class:`PiSession`, None if pi wrote
        none). ``env`` replaces the inherited environment when given (the sandbox passes
        its whitelist); pi's network self-checks are always off. A run past ``timeout``
        is killed and returns code 124."""
        argv, extra = self.wrapper(target, routing, [*(extra_args or []), "-p", prompt])
        base = dict(os.environ) if env is None else dict(env)
        full = {**base, **headless.QUIET_ENV, "REEF_PI_NOTICE": "0", **extra}
        done = headless.run(argv, Path(workdir), full, timeout)
        session = self._session_of(Path(target), extra[routing.session_env], done.started)
        return Transcript(done.returncode, done.stdout, done.stderr, session)

    def _session_of(self, target: Path, reef_session: str, started: float) -> PiSession | None:
        since = datetime.fromtimestamp(started - 1).astimezone()
        found = _harvest.harvest(self.sessions_dir(target), since)
        mine = [s for s in found if s.reef_session_id == reef_session]
        return mine[-1] if mine else None

    # ----------------------------------------------------------------- harvest

    def sessions_dir(self, target: Path) -> Path:
        override = os.environ.get("PI_CODING_AGENT_SESSION_DIR")
        return Path(override).expanduser() if override else Path(target) / "sessions"

    def harvest(self, target: Path, since: datetime | None = None) -> list[Session]:
        """Sessions under ``target/sessions`` (or ``$PI_CODING_AGENT_SESSION_DIR``) active
        since ``since``, oldest first, with receipts from Reef's extension entries and
        from records stored under the same ``REEF_SESSION_ID``."""
        return list(_harvest.harvest(self.sessions_dir(Path(target)), since))


def _recorded_command(target: Path) -> str | None:
    """The executable the installed extension runs (installs from before it was recorded
    in the manifest: read from ``extensions/reef/reef.json``)."""
    import json

    try:
        command = json.loads((Path(target) / render.CONFIG).read_text(encoding="utf-8"))["command"]
        return str(command[0]) if command else None
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None

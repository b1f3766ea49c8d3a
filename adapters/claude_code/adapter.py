"""``ClaudeCodeAdapter``: install, uninstall, wrapper, harvest and headless runs."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from adapters import _files
from adapters.base import (
    Adapter,
    Gateway,
    Launch,
    ReleaseToInstall,
    Routing,
    Session,
    Transcript,
)
from adapters.claude_code import agent, headless, render, settings_json
from adapters.claude_code.harvest import harvest as _harvest

RECORD_KEYS = (
    "adapter",
    "scenario",
    "release",
    "content_hash",
    "latest",
    "installed_at",
    "layout",
    "base_url",
    "agent_version",
    "skipped",
    "reef_command",
)


class ClaudeCodeAdapter(Adapter):
    """Claude Code 2.1.x. ``binary`` overrides where ``claude`` is (default: tools.find)."""

    name = "claude-code"

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary

    # ------------------------------------------------------------ install

    def default_target(self) -> Path:
        return headless.default_config_dir()

    def install(self, release: ReleaseToInstall, target: Path, routing: Routing) -> None:
        """Render ``release`` into ``target`` (a config dir or a project's ``.claude/``).

        Checks first, writes nothing on any problem: the binary and its version, the
        tree, every file Reef would merge (``settings.json`` must parse), files of the
        person's that an owned path would overwrite, and that ``target`` is writable.
        """
        from reef_cli.core import paths
        from reef_cli.core.releases import now_iso

        binary = agent.require(self.binary)
        version = agent.check_version(binary)
        target = target.expanduser().absolute()
        record = {
            "adapter": self.name,
            "scenario": release.scenario,
            "release": release.number,
            "content_hash": release.content_hash,
            "latest": release.latest,
            "installed_at": now_iso(),
            "layout": "project" if headless.is_project_dir(target) else "config-dir",
            "base_url": routing.base_url,
            "agent_version": ".".join(map(str, version)),
        }
        plan, _ = render.build_plan(
            release,
            target,
            routing,
            reef_home=paths.state_dir().expanduser().absolute(),
            binary=binary,
            record=record,
        )
        _files.apply(plan)

    def uninstall(self, target: Path) -> None:
        target = target.expanduser().absolute()
        manifest = _files.load_manifest(target)
        if manifest is not None and manifest.get("adapter") not in (None, self.name):
            raise _files.InstallError(
                f"{target} holds a {manifest.get('adapter')} install, not Claude Code's",
                f"uninstall it with --adapter {manifest.get('adapter')}",
            )
        _files.remove(
            target,
            {
                "CLAUDE.md": lambda text: _files.without_section(text) or None,
                settings_json.REL: settings_json.unmerged,
            },
        )

    def installed(self, target: Path) -> dict[str, Any] | None:
        manifest = _files.load_manifest(target.expanduser().absolute())
        if manifest is None or manifest.get("adapter") != self.name:
            return None
        record = {key: manifest.get(key) for key in RECORD_KEYS if key in manifest}
        record["target"] = str(target.expanduser().absolute())
        if not record.get("reef_command"):
            record["reef_command"] = _legacy_command(target.expanduser().absolute())
        return record

    # ------------------------------------------------------------ running

    def wrapper(
        self, target: Path, routing: Routing, argv: list[str]
    ) -> tuple[list[str], dict[str, str]]:
        """``[claude, *argv]`` and the variables to add to the environment.

        ``CLAUDE_CONFIG_DIR`` is set for a config-dir target; a project's ``.claude/``
        is found by Claude Code from the working directory, so run it there.
        """
        binary = agent.require(self.binary)
        return [binary, *argv], headless.wrapper_env(target, routing)

    def agent_version(self) -> str:
        return ".".join(map(str, agent.check_version(agent.require(self.binary))))

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
        """``claude -p PROMPT`` on ``files``, installed as the config dir
        ``workdir/.reef-agent``; tools that need a permission stay denied."""
        import time

        from adapters._process import BASE_ENV, headless_install, local_launch

        workdir = Path(workdir).absolute()
        target, routing, release = headless_install(files, workdir, gateway)
        self.install(release, target, routing)
        sid = headless.new_session_id()
        binary = agent.require(self.binary)
        argv = [binary, "-p", prompt, "--session-id", sid]
        given = {routing.token_env: gateway.token, routing.session_env: sid}
        env = {**BASE_ENV, **given, **headless.wrapper_env(target, routing, given)}
        started = time.time()
        done = (launch or local_launch)(argv, workdir, env, timeout)
        transcript = headless.transcript_of(done, target, sid)
        transcript.session_id = sid
        transcript.seconds = round(time.time() - started, 2)
        return transcript

    def run_installed(
        self,
        prompt: str,
        workdir: Path,
        target: Path,
        routing: Routing,
        env: Mapping[str, str] | None = None,
        timeout: float = 300.0,
        extra_args: Sequence[str] | None = None,
        *,
        skip_permissions: bool = False,
        session_id: str | None = None,
    ) -> Transcript:
        """``claude -p PROMPT`` once in ``workdir`` through `reef serve`.

        Returns what it printed and the session it wrote (``Transcript.session``, found by
        the ``--session-id`` Reef passes). ``env`` replaces the inherited environment when
        given (the sandbox passes its whitelist); the wrapper's variables always win. A
        run past ``timeout`` has its process group killed and returns code 124.

        ``skip_permissions`` lets every tool run (``--permission-mode bypassPermissions``):
        only inside a sandbox. Claude Code refuses that as root unless ``IS_SANDBOX=1``,
        which is then set. Without it, ``-p`` denies tools that need a permission (pass
        ``extra_args=["--allowedTools", "Bash Edit"]`` to allow some).
        """
        where = Path(target).expanduser().absolute()
        sid = session_id or headless.new_session_id()
        tail = ["-p", prompt, "--session-id", sid]
        if skip_permissions:
            tail += ["--permission-mode", "bypassPermissions"]
        argv, extra = self.wrapper(where, routing, [*tail, *(extra_args or [])])
        full_env = {**(os.environ if env is None else env), **extra}
        if skip_permissions and hasattr(os, "geteuid") and os.geteuid() == 0:
            full_env.setdefault("IS_SANDBOX", "1")
        config_dir = Path(full_env.get("CLAUDE_CONFIG_DIR") or headless.default_config_dir())
        return headless.run(argv, full_env, Path(workdir), timeout, sid, config_dir)

    # ------------------------------------------------------------ harvest

    def harvest(
        self, target: Path, since: datetime | None = None, *, store: Any = None
    ) -> list[Session]:
        """Sessions that used ``target``: its ``projects/`` for a config dir, or the
        sessions run inside the project for a project's ``.claude/``. Receipts come from
        Reef's record store (``store``, default: the one in REEF_HOME) by session id."""
        target = target.expanduser().absolute()
        if headless.is_project_dir(target):
            return _harvest(
                headless.default_config_dir(), since, project=target.parent, store=store
            )
        return _harvest(target, since, store=store)


def _legacy_command(target: Path) -> str | None:
    """The interpreter an install from before ``reef hook`` baked into its hooks
    (``PYTHONPATH=… /venv/bin/python -P -m adapters.claude_code.hook …``), if any."""
    import shlex

    try:
        commands = settings_json.reef_commands((target / settings_json.REL).read_text())
    except (OSError, _files.InstallError):
        return None
    for command in (c for found in commands.values() for c in found):
        try:
            words = shlex.split(command)
        except ValueError:
            continue
        if "-m" in words and "adapters.claude_code.hook" in words:
            index = words.index("-m")
            return words[index - 2] if words[index - 1] == "-P" else words[index - 1]
    return None

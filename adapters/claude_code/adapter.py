"""``ClaudeCodeAdapter``: install, uninstall, wrapper, harvest and headless runs."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from adapters import _files, _record
from adapters._binary import AgentBinary
from adapters._process import new_session_id
from adapters.base import (
    Adapter,
    HeadlessJob,
    HeadlessRun,
    ReleaseToInstall,
    Routing,
    Session,
    Transcript,
)
from adapters.claude_code import headless, render, settings_json
from adapters.claude_code.harvest import harvest as _harvest

#: The layout (CLAUDE.md, skills/, commands/, settings.json hooks,
#: projects/<cwd>/<session>.jsonl) was verified against 2.1.x.
BINARY = AgentBinary(
    tool="claude",
    name="Claude Code",
    supported=((2, 1), (3, 0)),
    pinned="2.1.332",
    install="npm i -g @anthropic-ai/claude-code",
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

        binary = BINARY.require(self.binary)
        target = target.expanduser().absolute()
        layout = "project" if headless.is_project_dir(target) else "config-dir"
        plan, _ = render.build_plan(
            release,
            target,
            routing,
            reef_home=paths.state_dir().expanduser().absolute(),
            binary=binary.path,
            record=_record.new(self.name, release, routing, binary.version_text, layout=layout),
        )
        _files.apply(plan)

    def uninstall(self, target: Path) -> None:
        target = target.expanduser().absolute()
        _record.refuse_other(target, self.name, "Claude Code")
        _files.remove(
            target, {render.CLAUDE_MD: _files.unsection, settings_json.REL: settings_json.unmerged}
        )

    def installed(self, target: Path) -> dict[str, Any] | None:
        record = _record.read(target, self.name)
        if record is not None and not record.get("reef_command"):
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
        binary = BINARY.require(self.binary).path
        return [binary, *argv], headless.wrapper_env(target, routing)

    def agent_version(self) -> str:
        return BINARY.require(self.binary).version_text

    def prepare_headless(self, job: HeadlessJob) -> HeadlessRun:
        """``claude -p PROMPT``, installed as the config dir ``job.target``; tools that need
        a permission stay denied."""
        target, routing = job.target, job.routing
        self.install(job.release, target, routing)
        sid = new_session_id()
        argv = [BINARY.require(self.binary).path, "-p", job.prompt, "--session-id", sid]
        given = {routing.token_env: job.gateway.token, routing.session_env: sid}
        env = {**given, **headless.wrapper_env(target, routing, given)}
        return HeadlessRun(argv, env, sid, lambda _: headless.session_of(target, sid))

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
        sid = session_id or new_session_id()
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

"""``CodexAdapter``: install, uninstall, wrapper, harvest and headless runs."""

from __future__ import annotations

import os
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
from adapters.codex import agent, headless, profile, render
from adapters.codex.harvest import harvest as _harvest

DEFAULT_MODEL = "default"
RECORD_KEYS = (
    "adapter",
    "scenario",
    "release",
    "content_hash",
    "latest",
    "installed_at",
    "base_url",
    "agent_version",
    "model",
    "skipped",
    "reef_command",
)


class CodexAdapter(Adapter):
    """Codex CLI 0.171+. ``binary`` overrides where ``codex`` is (default: tools.find);
    ``model`` is the model id the profile asks `reef serve` for (default: the first one
    serve lists, else ``default``)."""

    name = "codex"

    def __init__(self, binary: str | None = None, model: str | None = None) -> None:
        self.binary = binary
        self.model = model

    # ------------------------------------------------------------ install

    def default_target(self) -> Path:
        return headless.default_codex_home()

    def install(self, release: ReleaseToInstall, target: Path, routing: Routing) -> None:
        """Render ``release`` into ``target`` (a ``CODEX_HOME``).

        Checks first, writes nothing on any problem: the binary and its version, the
        tree, the person's ``config.toml`` (must parse; never written), files of theirs an
        owned path would overwrite, and that ``target`` is writable."""
        from reef_cli.core import paths
        from reef_cli.core.releases import now_iso

        binary = agent.require(self.binary)
        version = agent.check_version(binary)
        target = Path(target).expanduser().absolute()
        model = self.model or _recorded_model(target) or _discover(routing) or DEFAULT_MODEL
        record = {
            "adapter": self.name,
            "scenario": release.scenario,
            "release": release.number,
            "content_hash": release.content_hash,
            "latest": release.latest,
            "installed_at": now_iso(),
            "base_url": routing.base_url,
            "agent_version": ".".join(map(str, version)),
        }
        plan = render.build_plan(
            release,
            target,
            routing,
            reef_home=paths.state_dir().expanduser().absolute(),
            binary=binary,
            model=model,
            record=record,
        )
        _files.apply(plan)

    def uninstall(self, target: Path) -> None:
        target = Path(target).expanduser().absolute()
        manifest = _files.load_manifest(target)
        if manifest is not None and manifest.get("adapter") not in (None, self.name):
            raise _files.InstallError(
                f"{target} holds a {manifest.get('adapter')} install, not Codex's",
                f"uninstall it with --adapter {manifest.get('adapter')}",
            )
        _files.remove(
            target,
            {render.AGENTS: render.unsection, render.AGENTS_OVERRIDE: render.unsection},
        )

    def installed(self, target: Path) -> dict[str, Any] | None:
        where = Path(target).expanduser().absolute()
        manifest = _files.load_manifest(where)
        if manifest is None or manifest.get("adapter") != self.name:
            return None
        record = {key: manifest.get(key) for key in RECORD_KEYS if key in manifest}
        record["target"] = str(where)
        return record

    # ------------------------------------------------------------ running

    def wrapper(
        self, target: Path, routing: Routing, argv: list[str]
    ) -> tuple[list[str], dict[str, str]]:
        """``[codex, -p reef, *argv]`` (``-p`` only where Codex takes it) and the variables
        to add to the environment: ``CODEX_HOME``, the token variable, a fresh
        ``REEF_SESSION_ID`` and ``REEF_CLI``."""
        binary = agent.require(self.binary)
        return [binary, *headless.with_profile(argv)], headless.wrapper_env(target, routing)

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
        """``codex exec -p reef PROMPT`` on ``files``, installed as the ``CODEX_HOME``
        ``workdir/.reef-agent``. Without a ``launch`` Codex's own sandbox limits writes to
        ``workdir``; a ``launch`` (Reef's sandbox) isolates the run itself, and Codex's
        sandbox, which does not nest dependably, is off (docs/adapters-codex.md)."""
        import time

        from adapters._process import BASE_ENV, headless_install, local_launch

        workdir = Path(workdir).absolute()
        target, routing, release = headless_install(files, workdir, gateway)
        CodexAdapter(self.binary, model=gateway.model).install(release, target, routing)
        sid = headless.new_session_id()
        argv = headless.exec_argv(agent.require(self.binary), prompt, isolated=launch is not None)
        given = {routing.token_env: gateway.token}
        env = {
            **BASE_ENV,
            "TMPDIR": str(headless.tmp_dir(target)),
            **headless.wrapper_env(target, routing, given, session_id=sid),
        }
        started = time.time()
        done = (launch or local_launch)(argv, workdir, env, timeout)
        return headless.transcript_of(done, target, started, sid)

    # ------------------------------------------------------------ harvest

    def harvest(
        self, target: Path, since: datetime | None = None, *, store: Any = None
    ) -> list[Session]:
        """Sessions under ``target/sessions``, oldest first. Receipts come from Reef's
        record store (``store``, default: the one in REEF_HOME): the records whose
        request names the Codex session (their Reef session id is the session's
        ``reef_session_id``)."""
        target = Path(target).expanduser().absolute()
        return list(_harvest(target, since, store=store))


def _recorded_model(target: Path) -> str | None:
    """The model the installed profile asks for (a reinstall keeps it)."""
    path = target / profile.REL
    if (_files.load_manifest(target) or {}).get("adapter") != "codex" or not path.is_file():
        return None
    try:
        model = profile.installed(path.read_text(encoding="utf-8")).get("model")
    except (OSError, UnicodeDecodeError):
        return None
    return model if isinstance(model, str) and model else None


def _discover(routing: Routing) -> str | None:
    """The first model id `reef serve` lists (2 s), or None when it is not reachable."""
    import httpx

    from reef_cli.core import tokens

    try:
        token = os.environ.get(routing.token_env) or tokens.main_token(create=False)
        headers = {"authorization": f"Bearer {token}"} if token else {}
        headers["x-reef-scenario"] = routing.scenario
        resp = httpx.get(routing.base_url.rstrip("/") + "/v1/models", headers=headers, timeout=2)
        if resp.status_code != 200:
            return None
        for item in resp.json().get("data") or []:
            if isinstance(item, dict) and isinstance(item.get("id"), str) and item["id"]:
                return str(item["id"])
    except (httpx.HTTPError, ValueError, OSError, AttributeError):
        return None
    return None

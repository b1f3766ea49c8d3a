"""``OpenCodeAdapter``: install, uninstall, wrapper, harvest and headless runs."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
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
from adapters.opencode import agent, config_json, headless, render
from adapters.opencode import harvest as _harvest

DEFAULT_MODEL = "default"
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
    "config",
    "models",
)


class NotInstalled(_files.InstallError):
    """The folder holds no Reef install for opencode."""


class OpenCodeAdapter(Adapter):
    """opencode 1.18.x. ``binary`` overrides where ``opencode`` is (default: tools.find);
    ``models`` the model ids the ``reef`` provider lists (default: ask `reef serve`)."""

    name = "opencode"

    def __init__(
        self,
        binary: str | None = None,
        models: list[str] | None = None,
        discover_models: bool = True,
    ) -> None:
        self.binary = binary
        self.models = list(models) if models else None
        self.discover_models = discover_models

    # ------------------------------------------------------------ install

    def default_target(self) -> Path:
        return headless.default_config_dir()

    def install(self, release: ReleaseToInstall, target: Path, routing: Routing) -> None:
        """Render ``release`` into the config dir ``target``; all or nothing.

        Checks first, writes nothing on any problem: the binary and its version, the tree,
        the person's config (must parse as JSON/JSONC), files of the person's an owned path
        would overwrite, and that ``target`` is writable."""
        target = Path(target).expanduser().absolute()
        self._install(release, target, routing, self._models_for(target, routing))

    def _install(
        self, release: ReleaseToInstall, target: Path, routing: Routing, models: list[str]
    ) -> None:
        from reef_cli.core.releases import now_iso

        _, version = agent.require(self.binary)
        record = {
            "adapter": self.name,
            "scenario": release.scenario,
            "release": release.number,
            "content_hash": release.content_hash,
            "latest": release.latest,
            "installed_at": now_iso(),
            "layout": "global" if headless.is_global(target) else "config-dir",
            "base_url": routing.base_url,
            "agent_version": ".".join(map(str, version)),
        }
        plan = render.build_plan(release, target, routing, models=models, record=record)
        _files.apply(plan)

    def _models_for(self, target: Path, routing: Routing) -> list[str]:
        if self.models:
            return self.models
        if self.discover_models:
            found = discover(routing)
            if found:
                return found
        rel = (_files.load_manifest(target) or {}).get("config")
        return config_json.installed_models(target, rel) or [DEFAULT_MODEL]

    def uninstall(self, target: Path) -> None:
        target = Path(target).expanduser().absolute()
        manifest = _files.load_manifest(target)
        if manifest is None:
            raise NotInstalled(
                f"Reef is not installed in {target}",
                "nothing to remove; `reef harness install --adapter opencode` installs it",
            )
        if manifest.get("adapter") != self.name:
            raise _files.InstallError(
                f"{target} holds a {manifest.get('adapter')} install, not opencode's",
                f"uninstall it with --adapter {manifest.get('adapter')}",
            )
        backups = target / _files.STATE_DIR / "backup"

        def config_unmerged(rel: str) -> Callable[[str], str | None]:
            def unmerge(text: str) -> str | None:
                original = backups / rel
                before = original.read_bytes().decode("utf-8") if original.exists() else None
                return config_json.unmerged(text, before)

            return unmerge

        unmerge: dict[str, Callable[[str], str | None]] = {render.AGENTS: render.unsection}
        for rel in config_json.NAMES:
            unmerge[rel] = config_unmerged(rel)
        _files.remove(target, unmerge)

    def installed(self, target: Path) -> dict[str, Any] | None:
        where = Path(target).expanduser().absolute()
        manifest = _files.load_manifest(where)
        if manifest is None or manifest.get("adapter") != self.name:
            return None
        record = {key: manifest.get(key) for key in RECORD_KEYS if key in manifest}
        record["target"] = str(where)
        return record

    def notice(self, target: Path) -> str | None:
        """The start-up line the wrapper prints when a newer release is served than the one
        installed in ``target`` (opencode itself has no hook that could say it)."""
        from reef_cli.core import scenarios
        from reef_cli.core.errors import ReefError

        record = self.installed(target)
        if not record or not isinstance(record.get("release"), int):
            return None
        try:
            served = scenarios.get(str(record["scenario"])).chain().served()
        except ReefError:
            return None
        installed = record["release"]
        if served is None or served.number <= installed:
            return None
        return (
            f"Reef r{installed} installed — r{served.number} available "
            f"(reef-opencode versions; reef-opencode install {served.number})"
        )

    # ------------------------------------------------------------ running

    def wrapper(
        self, target: Path, routing: Routing, argv: list[str]
    ) -> tuple[list[str], dict[str, str]]:
        """``[opencode, --model reef/<id>, *argv]`` and the variables to add.

        ``OPENCODE_CONFIG_DIR``/``OPENCODE_DB`` point at ``target`` unless it is the
        global config dir; ``--model`` goes in for the TUI and ``run`` unless ``argv``
        picks a model, so a project's own ``model`` cannot route around Reef."""
        where = Path(target).expanduser().absolute()
        record = self.installed(where)
        if record is None:
            raise NotInstalled(
                f"Reef is not installed in {where}",
                f"run `reef harness install --adapter opencode --scenario {routing.scenario} "
                f"--target {where}` first",
            )
        binary, _ = agent.require(self.binary)
        models = config_json.installed_models(where, record.get("config"))
        if not models:
            raise _files.InstallError(
                f"{where / str(record.get('config'))} has no `reef` provider (edited since?)",
                "install again: `reef harness install --adapter opencode`",
            )
        model = f"{config_json.PROVIDER}/{models[0]}"
        return [binary, *headless.with_model(list(argv), model)], headless.wrapper_env(where)

    def agent_version(self) -> str:
        _, version = agent.require(self.binary)
        return ".".join(map(str, version))

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
        """``opencode run PROMPT`` on ``files``, installed as the config dir
        ``workdir/.reef-agent``; all of opencode's state (sessions, logs, caches) stays in it.
        Permission asks are rejected (opencode's ``run`` without ``--auto``)."""
        from adapters._process import BASE_ENV, headless_install, local_launch

        workdir = Path(workdir).absolute()
        target, routing, release = headless_install(files, workdir, gateway)
        self._install(release, target, routing, [gateway.model])
        headless.offline_dirs(target)
        binary, _ = agent.require(self.binary)
        sid = headless.new_session_id()
        model = f"{config_json.PROVIDER}/{gateway.model}"
        argv = headless.run_argv(binary, model, prompt, headless.title_of(prompt))
        env = {**BASE_ENV, **headless.headless_env(target, routing, gateway.token, sid)}
        started = time.time()
        done = (launch or local_launch)(argv, workdir, env, timeout)
        seconds = round(time.time() - started, 2)
        session = self._session_of(target, sid, started)
        return Transcript(
            returncode=done.returncode,
            stdout=done.stdout,
            stderr=done.stderr,
            session=session,
            timed_out=done.timed_out,
            session_id=sid,
            isolation=done.isolation,
            seconds=seconds,
        )

    def _session_of(self, target: Path, reef_id: str, started: float) -> Session | None:
        """The session a headless run just wrote (its store is the run's own), remembered
        under the run's Reef session id so a later harvest finds its receipts too."""
        since = datetime.fromtimestamp(started - 1).astimezone()
        found = _harvest.read_sessions(headless.db_path(target), since)
        if not found:
            return None
        session = found[-1]
        _harvest.remember(target, session.session_id, reef_id)
        linked = _harvest.receipts([session.session_id, reef_id])
        session.receipts = list(
            dict.fromkeys(linked.get(session.session_id, []) + linked.get(reef_id, []))
        )
        return session

    # ------------------------------------------------------------ harvest

    def harvest(
        self, target: Path, since: datetime | None = None, *, store: Any = None
    ) -> list[Session]:
        """Sessions run on ``target`` (its ``opencode.db``; the global store for the global
        config dir) that used the ``reef`` provider, oldest first, with receipts from
        Reef's record store (``store``, default: the one in REEF_HOME)."""
        where = Path(target).expanduser().absolute()
        return _harvest.harvest(
            headless.db_path(where), since, mapping=_harvest.session_map(where), store=store
        )


def discover(routing: Routing) -> list[str]:
    """Model ids `reef serve` lists (``GET /v1/models``, 2 s), or [] when it does not answer."""
    import httpx

    from reef_cli.core import tokens

    try:
        token = os.environ.get(routing.token_env) or tokens.main_token(create=False)
        headers = {"authorization": f"Bearer {token}"} if token else {}
        headers["x-reef-scenario"] = routing.scenario
        resp = httpx.get(routing.base_url.rstrip("/") + "/v1/models", headers=headers, timeout=2)
        if resp.status_code != 200:
            return []
        data = resp.json().get("data") or []
        return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")][:20]
    except (httpx.HTTPError, ValueError, OSError, AttributeError):
        return []

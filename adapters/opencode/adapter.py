"""``OpenCodeAdapter``: install, uninstall, wrapper, harvest and headless runs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from adapters import _files, _models, _record
from adapters._binary import AgentBinary
from adapters._files import NotInstalled
from adapters._harvest import receipts
from adapters.base import Adapter, HeadlessJob, HeadlessRun, ReleaseToInstall, Routing, Session
from adapters.opencode import config_json, headless, render
from adapters.opencode import harvest as _harvest

#: The layout this adapter writes (opencode.json(c) provider, AGENTS.md, skills/,
#: commands/, the SQLite session store) was verified on 1.18.33: >= 1.18, < 2.0.
BINARY = AgentBinary(
    tool="opencode",
    name="opencode",
    supported=((1, 18), (2, 0)),
    pinned="1.18.33",
    install="npm install -g opencode-ai",
    version_env=headless.QUIET_ENV,  # no update check or model catalog fetch for a version
)


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
        version = BINARY.require(self.binary).version_text
        layout = "global" if headless.is_global(target) else "config-dir"
        record = _record.new(self.name, release, routing, version, layout=layout)
        plan = render.build_plan(release, target, routing, models=models, record=record)
        _files.apply(plan)

    def _models_for(self, target: Path, routing: Routing) -> list[str]:
        def installed() -> list[str]:
            rel = (_files.load_manifest(target) or {}).get("config")
            return config_json.installed_models(target, rel)

        return _models.choose(
            self.models, routing, discover=self.discover_models, installed=installed
        )

    def uninstall(self, target: Path) -> None:
        target = Path(target).expanduser().absolute()
        if _record.refuse_other(target, self.name, "opencode") is None:
            raise NotInstalled(
                f"Reef is not installed in {target}",
                "nothing to remove; `reef harness install --adapter opencode` installs it",
            )
        backups = target / _files.STATE_DIR / "backup"

        def config_unmerged(rel: str) -> Callable[[str], str | None]:
            def unmerge(text: str) -> str | None:
                original = backups / rel
                before = original.read_bytes().decode("utf-8") if original.exists() else None
                return config_json.unmerged(text, before)

            return unmerge

        unmerge: dict[str, Callable[[str], str | None]] = {render.AGENTS: _files.unsection}
        for rel in config_json.NAMES:
            unmerge[rel] = config_unmerged(rel)
        _files.remove(target, unmerge)

    def installed(self, target: Path) -> dict[str, Any] | None:
        return _record.read(target, self.name)

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
            raise _record.not_installed(where, self.name, routing.scenario)
        binary = BINARY.require(self.binary).path
        models = config_json.installed_models(where, record.get("config"))
        if not models:
            raise _files.InstallError(
                f"{where / str(record.get('config'))} has no `reef` provider (edited since?)",
                "install again: `reef harness install --adapter opencode`",
            )
        model = f"{config_json.PROVIDER}/{models[0]}"
        return [binary, *headless.with_model(list(argv), model)], headless.wrapper_env(where)

    def agent_version(self) -> str:
        return BINARY.require(self.binary).version_text

    def prepare_headless(self, job: HeadlessJob) -> HeadlessRun:
        """``opencode run PROMPT``, installed as the config dir ``job.target``; all of
        opencode's state (sessions, logs, caches) stays in it. Permission asks are rejected
        (opencode's ``run`` without ``--auto``)."""
        from adapters._process import new_session_id

        target, gateway = job.target, job.gateway
        self._install(job.release, target, job.routing, [gateway.model])
        headless.offline_dirs(target)
        sid = new_session_id()
        model = f"{config_json.PROVIDER}/{gateway.model}"
        argv = headless.run_argv(
            BINARY.require(self.binary).path, model, job.prompt, headless.title_of(job.prompt)
        )
        env = headless.headless_env(target, job.routing, gateway.token, sid)
        return HeadlessRun(argv, env, sid, lambda t: self._session_of(target, sid, t))

    def _session_of(self, target: Path, reef_id: str, started: float) -> Session | None:
        """The session a headless run just wrote (its store is the run's own), remembered
        under the run's Reef session id so a later harvest finds its receipts too."""
        since = datetime.fromtimestamp(started - 1).astimezone()
        found = _harvest.read_sessions(headless.db_path(target), since)
        if not found:
            return None
        session = found[-1]
        _harvest.remember(target, session.session_id, reef_id)
        linked = receipts([session.session_id, reef_id])
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

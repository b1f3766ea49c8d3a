"""``CodexAdapter``: install, uninstall, wrapper, harvest and headless runs."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from adapters import _files, _models, _record
from adapters._binary import AgentBinary
from adapters.base import Adapter, HeadlessJob, HeadlessRun, ReleaseToInstall, Routing, Session
from adapters.codex import headless, profile, render
from adapters.codex.harvest import harvest as _harvest

#: ``codex --version`` prints ``codex-cli 0.171.0``. Codex is still 0.x, so a minor release
#: may move files; the layout Reef writes (``reef.config.toml`` profile, ``AGENTS.md``,
#: ``skills/``, hook trust hashes, ``sessions/YYYY/MM/DD/rollout-*.jsonl``) was verified
#: against 0.171.0 (docs/adapters-codex.md) and a 1.x is refused until it is checked.
BINARY = AgentBinary(
    tool="codex",
    name="Codex CLI",
    label="the Codex CLI",
    supported=((0, 171), (1, 0)),
    pinned="0.171.0",
    install="npm i -g @openai/codex@0.171.0",
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

        binary = BINARY.require(self.binary)
        target = Path(target).expanduser().absolute()
        model = self.model or _recorded_model(target) or _served_model(routing)
        plan = render.build_plan(
            release,
            target,
            routing,
            reef_home=paths.state_dir().expanduser().absolute(),
            binary=binary.path,
            model=model,
            record=_record.new(self.name, release, routing, binary.version_text),
        )
        _files.apply(plan)

    def uninstall(self, target: Path) -> None:
        target = Path(target).expanduser().absolute()
        _record.refuse_other(target, self.name, "Codex")
        _files.remove(
            target, {render.AGENTS: _files.unsection, render.AGENTS_OVERRIDE: _files.unsection}
        )

    def installed(self, target: Path) -> dict[str, Any] | None:
        return _record.read(target, self.name)

    # ------------------------------------------------------------ running

    def wrapper(
        self, target: Path, routing: Routing, argv: list[str]
    ) -> tuple[list[str], dict[str, str]]:
        """``[codex, -p reef, *argv]`` (``-p`` only where Codex takes it) and the variables
        to add to the environment: ``CODEX_HOME``, the token variable, a fresh
        ``REEF_SESSION_ID`` and ``REEF_CLI``."""
        binary = BINARY.require(self.binary).path
        return [binary, *headless.with_profile(argv)], headless.wrapper_env(target, routing)

    def agent_version(self) -> str:
        return BINARY.require(self.binary).version_text

    def prepare_headless(self, job: HeadlessJob) -> HeadlessRun:
        """``codex exec -p reef PROMPT``, installed as the ``CODEX_HOME`` ``job.target``.
        Not ``isolated``, Codex's own sandbox limits writes to the work dir; under the
        caller's isolation (Reef's sandbox) Codex's sandbox, which does not nest dependably,
        is off (docs/adapters-codex.md)."""
        from adapters._process import new_session_id

        target, routing = job.target, job.routing
        CodexAdapter(self.binary, model=job.gateway.model).install(job.release, target, routing)
        sid = new_session_id()
        binary = BINARY.require(self.binary).path
        argv = headless.exec_argv(binary, job.prompt, isolated=job.isolated)
        env = {
            "TMPDIR": str(headless.tmp_dir(target)),
            **headless.wrapper_env(target, routing, {routing.token_env: job.gateway.token}, sid),
        }
        return HeadlessRun(argv, env, sid, lambda t: headless.session_of(target, t, sid))

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


def _served_model(routing: Routing) -> str:
    """The first model id `reef serve` lists (2 s), else ``default``."""
    return (_models.served(routing) or [_models.DEFAULT])[0]

"""Scenarios: one evolving harness each, with its own release chain, records and policy.

Layout under the state dir::

    scenarios/<name>/scenario.toml   description, created_at
    scenarios/<name>/chain.git       the release chain (bare git repository)
    archive/<name>-<utc stamp>/      where `delete` moves a scenario: nothing is destroyed

Creation builds the folder under a temporary name and renames it into place, so a
half-created scenario is never visible.
"""

from __future__ import annotations

import shutil
import tempfile
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from reef_cli.core import paths
from reef_cli.core.errors import (
    OptionInvalid,
    ScenarioExists,
    ScenarioInUse,
    ScenarioNotFound,
    StateError,
)
from reef_cli.core.fsutil import atomic_write_text, stat_key
from reef_cli.core.names import check_name

if TYPE_CHECKING:
    from reef_cli.core.releases import Chain, Release

SCENARIO_FILE = "scenario.toml"
CHAIN_DIR = "chain.git"
# Who starts the live loop's runs: auto, the loop once the evidence is ready; manual, only
# POST /reef/train; hybrid, both (a run on demand before the batch is full).
TRAINING_MODES = ("auto", "manual", "hybrid")


@dataclass(frozen=True)
class Scenario:
    name: str
    path: Path
    description: str
    created_at: str
    training_mode: str = "auto"

    @property
    def chain_dir(self) -> Path:
        return self.path / CHAIN_DIR

    def chain(self) -> Chain:
        """The release chain (``releases`` is imported lazily: it pulls in git)."""
        from reef_cli.core.releases import Chain

        return Chain(self.chain_dir)

    def resolve(self, spec: str) -> Release:
        """A release spec (``3``, ``r3``, ``latest``, ``previous``, ``served``,
        ``installed``) -> the release; ``installed`` reads the install ledger."""
        from reef_cli.core.installs import installed_release

        return self.chain().resolve(spec, installed_release(self.name))


ChainKey = tuple[tuple[int, int, int] | None, tuple[int, int, int] | None]


def chain_ref_files(chain_dir: Path) -> tuple[str, str]:
    """The two files whose change means the chain moved, as strings: ``chain_key`` on
    them stats without building a path (the proxy checks them on every request)."""
    return (str(chain_dir / paths.CHAIN_REF), str(chain_dir / "packed-refs"))


def chain_key(ref_files: tuple[str, str]) -> ChainKey:
    """Changes whenever the chain's ref moves (a publish, promote or rollback by any
    process: git writes a new ref file and renames it in); two stats, no git."""
    return (stat_key(ref_files[0]), stat_key(ref_files[1]))


def chain_dir_of(name: str) -> Path:
    """Where scenario ``name``'s chain is (whether or not it exists)."""
    return paths.scenarios_dir() / name / CHAIN_DIR


def _read(path: Path) -> Scenario:
    meta_file = path / SCENARIO_FILE
    try:
        data = tomllib.loads(meta_file.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise StateError(
            f"scenario folder {path} has no readable {SCENARIO_FILE}",
            f"restore {meta_file} or move the folder aside",
        ) from exc
    mode = data.get("training_mode", "auto")
    if mode not in TRAINING_MODES:
        raise StateError(
            f"{meta_file}: training_mode {mode!r} is not one of {', '.join(TRAINING_MODES)}",
            f"set it with `reef scenario set {path.name} --training-mode auto`",
        )
    return Scenario(
        name=path.name,
        path=path,
        description=str(data.get("description", "")),
        created_at=str(data.get("created_at", "")),
        training_mode=mode,
    )


def update(
    name: str, *, description: str | None = None, training_mode: str | None = None
) -> Scenario:
    """Change a scenario's description or training mode (scenario.toml, written atomically)."""
    import tomli_w

    if training_mode is not None and training_mode not in TRAINING_MODES:
        raise OptionInvalid(
            f"training_mode {training_mode!r} is not one of {', '.join(TRAINING_MODES)}",
            "auto: the live loop starts runs; manual: only POST /reef/train; hybrid: both",
        )
    found = get(name)
    meta_file = found.path / SCENARIO_FILE
    data = tomllib.loads(meta_file.read_text(encoding="utf-8"))
    if description is not None:
        data["description"] = description
    if training_mode is not None:
        data["training_mode"] = training_mode
    atomic_write_text(meta_file, tomli_w.dumps(data))
    return _read(found.path)


def create(name: str, description: str = "") -> Scenario:
    import tomli_w

    from reef_cli.core.releases import Chain

    check_name("scenario", name)
    root = paths.ensure_state_dir() / "scenarios"
    root.mkdir(exist_ok=True)
    final = root / name
    if final.exists():
        raise ScenarioExists(f"scenario {name!r} already exists", "pick another name")
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=root))
    try:
        created = datetime.now(UTC).isoformat(timespec="seconds")
        (staging / SCENARIO_FILE).write_text(
            tomli_w.dumps({"description": description, "created_at": created}), encoding="utf-8"
        )
        Chain.create(staging / CHAIN_DIR)
        staging.rename(final)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if final.exists():
            raise ScenarioExists(f"scenario {name!r} already exists", "pick another name") from exc
        raise StateError(f"cannot create scenario {name!r}: {exc}") from exc
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return _read(final)


def get(name: str) -> Scenario:
    check_name("scenario", name)
    path = paths.scenarios_dir() / name
    if not (path / SCENARIO_FILE).exists():
        raise ScenarioNotFound(
            f"unknown scenario {name!r}",
            f"create it with `reef scenario create {name}` (see `reef scenario list`)",
        )
    return _read(path)


def get_or_create(name: str) -> Scenario:
    try:
        return get(name)
    except ScenarioNotFound:
        try:
            return create(name)
        except ScenarioExists:
            return get(name)


def list_all() -> list[Scenario]:
    root = paths.scenarios_dir()
    if not root.is_dir():
        return []
    return [
        _read(p)
        for p in sorted(root.iterdir())
        if not p.name.startswith(".") and (p / SCENARIO_FILE).exists()
    ]


def delete(name: str, *, force: bool = False) -> Path:
    """Archive the scenario (moved, never removed); returns where it went. Refused
    (ScenarioInUse) while one of its jobs is queued or running, and while an agent is
    installed from it unless ``force`` (the agent keeps the files it has)."""
    from reef_cli.core import installs, jobs

    scenario = get(name)
    running = jobs.active(name)
    if running:
        raise ScenarioInUse(
            f"scenario {name!r} has a {running[0].state} job ({running[0].id})",
            "wait for it to end (`reef scenario status`), then archive the scenario",
        )
    agents = sorted({i.adapter for i in installs.for_scenario(name)})
    if agents and not force:
        raise ScenarioInUse(
            f"scenario {name!r} is installed in {', '.join(agents)}",
            "archive it anyway with --force (the API: ?force=true); the agents keep the "
            "files installed from it",
        )
    archive = paths.archive_dir()
    archive.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = archive / f"{name}-{stamp}"
    scenario.path.rename(target)
    return target


def list_archived() -> list[Path]:
    root = paths.archive_dir()
    return sorted(root.iterdir()) if root.is_dir() else []


def restore(archived: str) -> Scenario:
    """Bring an archived scenario back under its original name."""
    source = paths.archive_dir() / archived
    if not (source / SCENARIO_FILE).exists():
        raise ScenarioNotFound(
            f"no archived scenario {archived!r}", "see `reef scenario list --archived`"
        )
    name = archived.rsplit("-", 1)[0]
    target = paths.scenarios_dir() / name
    if target.exists():
        raise ScenarioExists(f"scenario {name!r} exists again", "delete or rename it first")
    target.parent.mkdir(parents=True, exist_ok=True)
    source.rename(target)
    return _read(target)

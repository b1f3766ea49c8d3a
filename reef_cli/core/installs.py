"""Which release is installed where: a small ledger in the state dir.

Adapters write it when they install or uninstall a release into an agent's folder, so
core commands (`reef harness diff installed latest`) and the in-agent `/versions` can
say "installed r3, latest r5" without knowing any agent's layout.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from reef_cli.core import paths
from reef_cli.core.clock import now_iso
from reef_cli.core.fsutil import atomic_write_text

LEDGER = "installs.json"


@dataclass(frozen=True)
class Install:
    scenario: str
    adapter: str
    target: str
    release: int
    content_hash: str
    installed_at: str


def _ledger_path() -> Path:
    return paths.state_dir() / LEDGER


def _load() -> list[dict[str, Any]]:
    path = _ledger_path()
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError, RecursionError):
        return []  # a damaged ledger only loses the "installed" hint; installs still work
    return [item for item in data if isinstance(item, dict)] if isinstance(data, list) else []


def record(scenario: str, adapter: str, target: Path, release: int, content_hash: str) -> Install:
    entry = Install(scenario, adapter, str(target.resolve()), release, content_hash, now_iso())
    rows = [
        r for r in _load() if not (r.get("adapter") == adapter and r.get("target") == entry.target)
    ]
    rows.append(asdict(entry))
    paths.ensure_state_dir()
    atomic_write_text(_ledger_path(), json.dumps(rows, indent=2) + "\n")
    return entry


def forget(adapter: str, target: Path) -> None:
    resolved = str(target.resolve())
    rows = [r for r in _load() if not (r.get("adapter") == adapter and r.get("target") == resolved)]
    if _ledger_path().exists():
        atomic_write_text(_ledger_path(), json.dumps(rows, indent=2) + "\n")


def all_installs() -> list[Install]:
    """Every recorded install, oldest first (rows that do not parse are skipped)."""
    out = []
    for row in _load():
        try:
            out.append(Install(**row))
        except TypeError:
            continue
    return sorted(out, key=lambda i: i.installed_at)


def for_scenario(scenario: str) -> list[Install]:
    return [i for i in all_installs() if i.scenario == scenario]


def installed_release(scenario: str) -> int | None:
    """The release most recently installed anywhere for ``scenario``, if any."""
    found = for_scenario(scenario)
    return found[-1].release if found else None

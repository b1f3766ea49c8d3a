"""What an install says about itself (the record in ``.reef/install.json``), read back.

The adapters that check their binary at install (Claude Code, Codex, opencode) record the
same facts; each adds its own (``layout``, ``model``, ``config`` …) through ``extra``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters._files import BOOKKEEPING, InstallError, NotInstalled, load_manifest
from adapters.base import ReleaseToInstall, Routing


def new(
    adapter: str, release: ReleaseToInstall, routing: Routing, agent_version: str, **extra: Any
) -> dict[str, Any]:
    """The record an install of ``release`` writes (the plan adds what it skipped)."""
    from reef_cli.core.clock import now_iso

    return {
        "adapter": adapter,
        "scenario": release.scenario,
        "release": release.number,
        "content_hash": release.content_hash,
        "latest": release.latest,
        "installed_at": now_iso(),
        "base_url": routing.base_url,
        "agent_version": agent_version,
        **extra,
    }


def read(target: Path, adapter: str) -> dict[str, Any] | None:
    """``adapter``'s install record in ``target`` plus the ``target`` itself; None when
    the folder holds no install of that adapter."""
    where = Path(target).expanduser().absolute()
    manifest = load_manifest(where)
    if manifest is None or manifest.get("adapter") != adapter:
        return None
    record = {key: value for key, value in manifest.items() if key not in BOOKKEEPING}
    return record | {"target": str(where)}


def release_of(target: Path) -> int | None:
    """The release the record in ``target`` names (read on every run and every hook, so
    a ``/versions N install`` is what the next session uses)."""
    number = (load_manifest(Path(target).expanduser().absolute()) or {}).get("release")
    return number if isinstance(number, int) and not isinstance(number, bool) else None


def refuse_other(target: Path, adapter: str, label: str) -> dict[str, Any] | None:
    """The manifest in ``target``; ``InstallError`` when another adapter installed there
    (its uninstall would take out what that one needs)."""
    manifest = load_manifest(target)
    other = manifest.get("adapter") if manifest is not None else None
    if other not in (None, adapter):
        raise InstallError(
            f"{target} holds a {other} install, not {label}'s",
            f"uninstall it with --adapter {other}",
        )
    return manifest


def not_installed(target: Path, adapter: str, scenario: str) -> NotInstalled:
    """The error for running the agent on a folder Reef has not installed into."""
    return NotInstalled(
        f"Reef is not installed in {target}",
        f"run `reef harness install --adapter {adapter} --scenario {scenario} "
        f"--target {target}` first",
    )

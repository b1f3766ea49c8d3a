"""Rendering a release into opencode's config dir: the install plan.

=====================  ==========================================================
harness tree           opencode config dir (``~/.config/opencode`` or ``OPENCODE_CONFIG_DIR``)
=====================  ==========================================================
rules/<n>.md           ``AGENTS.md``: one marked section, the person's text kept
skills/<n>/...         ``skills/<n>/...`` (opencode reads ``skill/`` and ``skills/``)
commands/<n>.md        ``commands/<n>.md`` (frontmatter ``description``; ``$ARGUMENTS``)
extensions/<n>.ts      skipped: pi only (listed in the install record as ``skipped``)
reef.toml              not installed
(routing)              ``opencode.jsonc``/``opencode.json``: ``provider.reef`` and
                       ``model: reef/<id>`` spliced in (the person's bytes kept)
=====================  ==========================================================
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters import _files
from adapters._files import InstallError, Merge, Plan
from adapters.base import ReleaseToInstall, Routing
from adapters.opencode import config_json
from reef_cli.core.tree import HarnessTree, parse_files

AGENTS = "AGENTS.md"


def agents_section(tree: HarnessTree, scenario: str, number: int) -> str:
    """The body of Reef's section in ``AGENTS.md``: every rule, in the tree's order."""
    lines = [f'# Reef harness: scenario "{scenario}", release r{number}']
    if not tree.rules:
        lines += ["", "(This release has no rules.)"]
    for rule in tree.rules:
        lines += ["", f"<!-- reef rule: {rule.name} -->", rule.body.strip()]
    return "\n".join(lines) + "\n"


def unsection(text: str) -> str | None:
    """``AGENTS.md`` without Reef's section (None when nothing else was in it)."""
    return _files.without_section(text) or None


def build_plan(
    release: ReleaseToInstall,
    target: Path,
    routing: Routing,
    *,
    models: list[str],
    record: dict[str, Any],
) -> Plan:
    """The whole install, planned in memory: every file checked before anything is written."""
    tree = parse_files(release.files, where=f"r{release.number}")
    plan = Plan(target=target)
    skipped: list[str] = []
    for rel, text in release.files.items():
        if rel.startswith(("skills/", "commands/")):
            plan.own(rel, text)
        elif rel.startswith("extensions/"):
            skipped.append(rel)  # pi extensions: opencode plugins are another API

    section = agents_section(tree, release.scenario, release.number)
    plan.merge(
        AGENTS,
        Merge(apply=lambda text: _files.with_section(text, section), remove=unsection),
    )

    previous = (_files.load_manifest(target) or {}).get("config")
    rel = config_json.config_rel(target, previous if isinstance(previous, str) else None)
    where = str(target / rel)
    entry = config_json.provider_entry(routing, models, release.number)
    model = f"{config_json.PROVIDER}/{models[0]}"
    config_json.check(_read(target / rel), where)  # a config that does not parse: stop here
    plan.merge(
        rel,
        Merge(
            apply=lambda text: config_json.merged(text, entry, model, where),
            remove=lambda text: config_json.unmerged(text, None),
        ),
    )
    plan.record = {**record, "skipped": sorted(skipped), "config": rel, "models": models}
    _check_people_files(plan)
    return plan


def _read(path: Path) -> str | None:
    if not path.exists():
        return None
    try:
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InstallError(
            f"cannot read {path} as UTF-8 text ({exc}); nothing was installed",
            f"fix or move {path.name} aside, then install again",
        ) from exc


def _check_people_files(plan: Plan) -> None:
    """Refuse to overwrite a file Reef did not write (uninstall would delete it)."""
    previous = _files.load_manifest(plan.target) or {}
    ours = set(previous.get("owned", []))
    for rel in sorted(plan.owned):
        path = plan.target / rel
        if rel in ours:
            continue
        if path.exists() or path.is_symlink():
            raise InstallError(
                f"{path} already exists and is not Reef's; nothing was installed",
                f"rename or move your {rel} (or the one in the harness tree), then install again",
            )
    for rel in plan.merged:
        path = plan.target / rel
        if path.exists() and not path.is_file():
            raise InstallError(
                f"{path} is not a regular file; nothing was installed", f"move {rel} aside"
            )

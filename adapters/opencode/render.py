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

from adapters import _files, _render
from adapters._files import Merge, Plan
from adapters.base import ReleaseToInstall, Routing
from adapters.opencode import config_json
from reef_cli.core.tree import parse_files

AGENTS = "AGENTS.md"


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
    owned, skipped = _render.copied(release, ("skills/", "commands/"))
    for rel, text in owned.items():
        plan.own(rel, text)

    section = _render.rules_section(tree, release.scenario, release.number)
    plan.merge(
        AGENTS,
        Merge(apply=lambda text: _files.with_section(text, section), remove=_files.unsection),
    )

    previous = (_files.load_manifest(target) or {}).get("config")
    rel = config_json.config_rel(target, previous if isinstance(previous, str) else None)
    where = str(target / rel)
    entry = config_json.provider_entry(routing, models, release.number)
    model = f"{config_json.PROVIDER}/{models[0]}"
    config_json.check(_files.read_text(target / rel), where)  # one that does not parse: stop
    plan.merge(
        rel,
        Merge(
            apply=lambda text: config_json.merged(text, entry, model, where),
            remove=lambda text: config_json.unmerged(text, None),
        ),
    )
    plan.record = {**record, "skipped": skipped, "config": rel, "models": models}
    _files.refuse_overwrites(plan)
    return plan

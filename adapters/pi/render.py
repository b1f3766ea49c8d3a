"""Render a release into pi's agent dir as an all-or-nothing install plan.

=========================  ======================================================
tree                       pi agent dir
=========================  ======================================================
rules/<n>.md               AGENTS.md, in Reef's marked section (the rest is yours)
skills/<n>/**              skills/<n>/**
commands/<n>.md            prompts/<n>.md (pi prompt templates are slash commands)
extensions/<n>.ts          extensions/<n>.ts
(Reef itself)              extensions/reef/index.ts + extensions/reef/reef.json
(routing)                  models.json: the ``reef`` provider (yours stay)
=========================  ======================================================
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from adapters import _files, _render
from adapters._files import InstallError, Merge, Plan
from adapters.base import ReleaseToInstall, Routing
from adapters.pi import models_json
from reef_cli.core import launcher
from reef_cli.core.frontmatter import split_frontmatter

AGENTS = "AGENTS.md"
EXTENSION_DIR = "extensions/reef"
EXTENSION = f"{EXTENSION_DIR}/index.ts"
CONFIG = f"{EXTENSION_DIR}/reef.json"

_env = _render.environment(Path(__file__).parent / "templates", trim_blocks=False)


def agents_section(release: ReleaseToInstall) -> str:
    rules = [
        {"name": rel[len("rules/") : -len(".md")], "body": split_frontmatter(text, rel)[1]}
        for rel, text in sorted(release.files.items())
        if rel.startswith("rules/") and rel.endswith(".md")
    ]
    return _env.get_template("agents_section.md.j2").render(
        scenario=release.scenario, number=release.number, rules=rules
    )


def extension_source(config_path: Path, release: ReleaseToInstall) -> str:
    return _env.get_template("reef_extension.ts.j2").render(
        config_path=str(config_path), scenario=release.scenario, number=release.number
    )


def cli_env(routing: Routing, reef_home: Path) -> dict[str, str]:
    """What the extension's `reef` runs need: the same state dir and the same serve address."""
    env = {"REEF_HOME": str(reef_home)}
    parts = urlsplit(routing.base_url)
    if parts.hostname:
        env["REEF_SERVE_HOST"] = parts.hostname
    if parts.port:
        env["REEF_SERVE_PORT"] = str(parts.port)
    return env


def extension_config(
    release: ReleaseToInstall, target: Path, routing: Routing, reef_home: Path
) -> dict[str, Any]:
    return {
        # This installation's `reef`; the extension falls back to $REEF_CLI or `reef` on
        # PATH (with a visible warning) when the recorded path is gone.
        "command": launcher.cli_argv(),
        "cliEnv": launcher.CLI_ENV,
        "env": cli_env(routing, reef_home),
        "scenario": release.scenario,
        "release": release.number,
        "target": str(target),
        "asksDir": str(reef_home / "asks"),
        "sessionEnv": routing.session_env,
        "baseUrl": routing.base_url,
    }


def tree_files(release: ReleaseToInstall) -> dict[str, str]:
    """The release's own files at their pi paths (rules excluded: they go to AGENTS.md)."""
    out: dict[str, str] = {}
    for rel, text in release.files.items():
        if rel.startswith("skills/"):
            out[rel] = text
        elif rel.startswith("commands/") and rel.endswith(".md"):
            out["prompts/" + rel[len("commands/") :]] = text
        elif rel.startswith("extensions/") and rel.endswith(".ts"):
            if rel == "extensions/reef.ts":
                raise InstallError(
                    "the release has an extension named 'reef', which Reef's own pi extension "
                    "uses; nothing was installed",
                    "rename extensions/reef.ts in the tree and publish again",
                )
            out[rel] = text
    return out


def plan(
    release: ReleaseToInstall,
    target: Path,
    routing: Routing,
    *,
    models: list[str],
    reef_home: Path,
    token_file: Path | None,
) -> Plan:
    """Everything the install writes, computed (and checked) before anything is written."""
    models_json.check(target)
    _files.read_text(target / AGENTS)  # merged later: it must be text
    owned = tree_files(release)
    config_path = target / CONFIG
    owned[EXTENSION] = extension_source(config_path, release)
    owned[CONFIG] = (
        json.dumps(extension_config(release, target, routing, reef_home), indent=2) + "\n"
    )
    result = Plan(target=target)
    for rel, text in sorted(owned.items()):
        result.own(rel, text)
    section = agents_section(release)
    result.merge(AGENTS, Merge(lambda old: _files.with_section(old, section), _files.unsection))
    entry = models_json.provider_entry(routing, models, token_file, release.number)
    result.merge(
        models_json.REL,
        Merge(
            lambda old: models_json.merged(old, entry, str(target / models_json.REL)),
            models_json.unmerged,
        ),
    )
    result.record = {
        "adapter": "pi",
        "scenario": release.scenario,
        "release": release.number,
        "content_hash": release.content_hash,
        "latest": release.latest,
        "base_url": routing.base_url,
        "models": models,
        "reef_command": json.loads(owned[CONFIG])["command"][0],
    }
    _files.refuse_overwrites(result, folders=("skills", "extensions"))
    return result

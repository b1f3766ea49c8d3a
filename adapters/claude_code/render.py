"""Rendering a release into Claude Code's layout: the install plan.

=====================  ==========================================================
harness tree           Claude Code folder (``CLAUDE_CONFIG_DIR`` or a project's ``.claude/``)
=====================  ==========================================================
rules/<n>.md           ``CLAUDE.md``: one marked section, the person's text kept
skills/<n>/...         ``skills/<n>/...`` (Agent Skills format, copied as is)
commands/<n>.md        ``commands/<n>.md`` (frontmatter description, argument-hint)
extensions/<n>.ts      skipped: pi only (listed in the install record as ``skipped``)
reef.toml              not installed
(Reef's own)           ``commands/versions.md``, hooks in ``settings.json``,
                       ``.reef/hook.json`` (what the hook needs: scenario, target, REEF_HOME)
=====================  ==========================================================
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from adapters import _files
from adapters._files import InstallError, Merge, Plan
from adapters.base import ReleaseToInstall, Routing
from adapters.claude_code import settings_json
from reef_cli.core.tree import HarnessTree, parse_files

TEMPLATES = Path(__file__).parent / "templates"
HOOK_CONFIG = f"{_files.STATE_DIR}/hook.json"
VERSIONS_COMMAND = "commands/versions.md"
RESERVED_COMMANDS = frozenset({"versions"})
HOOK_MODULE = "adapters.claude_code.hook"
EVENTS = {"SessionStart": "session-start", "UserPromptSubmit": "user-prompt-submit"}


def _env() -> Environment:
    return Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        keep_trailing_newline=True,
        autoescape=False,
        undefined=StrictUndefined,
        trim_blocks=True,
    )


def claude_md_section(tree: HarnessTree, scenario: str, number: int) -> str:
    return (
        _env()
        .get_template("claude_md.j2")
        .render(scenario=scenario, number=number, rules=tree.rules)
    )


def versions_command(scenario: str) -> str:
    head = {
        "description": f'Reef releases of "{scenario}": /versions, /versions N '
        "(what changed and why), /versions N install",
        "argument-hint": "[N] [install]",
        "disable-model-invocation": True,
    }
    frontmatter = yaml.safe_dump(head, sort_keys=False, allow_unicode=True, width=1000)
    return (
        _env()
        .get_template("versions_command.j2")
        .render(frontmatter=frontmatter, scenario=scenario)
    )


def package_root() -> Path:
    """The folder that holds the ``adapters`` package (put on the hook's PYTHONPATH)."""
    return Path(__file__).resolve().parents[2]


def hook_command(event_arg: str, config: Path, python: str | None = None) -> str:
    """The shell command Claude Code runs for one hook event.

    ``-P`` keeps the project's own folder (Claude Code runs hooks in it) off ``sys.path``,
    so a project with its own ``adapters`` package cannot shadow Reef's.
    """
    py = python or sys.executable
    return (
        f"PYTHONPATH={shlex.quote(str(package_root()))} {shlex.quote(py)} -P -m {HOOK_MODULE} "
        f"{event_arg} --config {shlex.quote(str(config))}"
    )


def hook_config(
    release: ReleaseToInstall, target: Path, routing: Routing, reef_home: Path, binary: str
) -> str:
    data: dict[str, Any] = {
        "adapter": "claude-code",
        "scenario": release.scenario,
        "target": str(target),
        "reef_home": str(reef_home),
        "base_url": routing.base_url,
        "binary": binary,
    }
    return json.dumps(data, indent=2) + "\n"


def build_plan(
    release: ReleaseToInstall,
    target: Path,
    routing: Routing,
    *,
    reef_home: Path,
    binary: str,
    record: dict[str, Any],
) -> tuple[Plan, list[str]]:
    """The whole install, planned in memory; returns the plan and the skipped paths."""
    tree = parse_files(release.files, where=f"r{release.number}")
    clash = sorted(RESERVED_COMMANDS & {c.name for c in tree.commands})
    if clash:
        raise InstallError(
            f"release r{release.number} has a command named {clash[0]!r}, which Reef's "
            "/versions uses in Claude Code; nothing was installed",
            f"rename commands/{clash[0]}.md in the harness tree and publish again",
        )
    plan = Plan(target=target)
    skipped: list[str] = []
    for rel, text in release.files.items():
        if rel.startswith(("skills/", "commands/")):
            plan.own(rel, text)
        elif rel.startswith("extensions/"):
            skipped.append(rel)  # pi extensions: Claude Code has no equivalent
    plan.own(VERSIONS_COMMAND, versions_command(release.scenario))
    config = target / HOOK_CONFIG
    plan.own(HOOK_CONFIG, hook_config(release, target, routing, reef_home, binary))

    section = claude_md_section(tree, release.scenario, release.number)
    plan.merge(
        "CLAUDE.md",
        Merge(
            apply=lambda text: _files.with_section(text, section),
            remove=lambda text: _files.without_section(text) or None,
        ),
    )
    commands = {event: hook_command(arg, config) for event, arg in EVENTS.items()}
    plan.merge(
        settings_json.REL,
        Merge(
            apply=lambda text: settings_json.merged(text, commands),
            remove=settings_json.unmerged,
        ),
    )
    plan.record = {**record, "skipped": skipped}
    _check_people_files(plan)
    return plan, skipped


def _check_people_files(plan: Plan) -> None:
    """Refuse to overwrite a file Reef did not write (it would be deleted on uninstall)."""
    previous = _files.load_manifest(plan.target) or {}
    ours = set(previous.get("owned", []))
    for rel in sorted(plan.owned):
        path = plan.target / rel
        if rel in ours or rel.startswith(f"{_files.STATE_DIR}/"):
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

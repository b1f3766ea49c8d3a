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
from pathlib import Path
from typing import Any

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from adapters import _files
from adapters._files import InstallError, Merge, Plan
from adapters.base import ReleaseToInstall, Routing
from adapters.claude_code import settings_json
from reef_cli.core import launcher
from reef_cli.core.tree import HarnessTree, parse_files

TEMPLATES = Path(__file__).parent / "templates"
HOOK_CONFIG = f"{_files.STATE_DIR}/hook.json"
VERSIONS_COMMAND = "commands/versions.md"
RESERVED_COMMANDS = frozenset({"versions"})
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


#: What a hook says when no `reef` command can be found at all (the venv moved or was
#: removed): a visible line at session start, and ``/versions`` blocked with the same text
#: (so it never goes to the model). Other prompts go on untouched.
MISSING = (
    "Reef: cannot find the `reef` command (the one recorded at install, {recorded}, is "
    "gone and there is none on PATH), so /versions and update notices are off. Put `reef` "
    "on PATH or install again: reef harness install --adapter claude-code --target {target}"
)


def hook_command(event_arg: str, config: Path, reef: str | None = None) -> str:
    """The shell command Claude Code runs for one hook event: ``reef hook claude-code
    EVENT --config F`` with ``reef`` resolved when the hook runs.

    ``reef`` is looked up in order: ``$REEF_CLI`` (set by `reef-claude` to the running
    one), the path recorded here at install (``reef``, default: this installation's), and
    ``reef`` on ``PATH``. A console script puts its own ``bin/`` (not the project Claude
    Code runs the hook in) first on ``sys.path``, so a project's own ``adapters`` package
    cannot shadow Reef's.
    """
    recorded = reef if reef is not None else (launcher.current_cli() or "")
    q = shlex.quote
    call = f"hook claude-code {event_arg} --config {q(str(config))}"
    message = MISSING.format(recorded=recorded or "(none)", target=config.parent.parent)
    if event_arg == "session-start":
        fallback = f"printf '%s\\n' {q(json.dumps({'systemMessage': message}))}"
    else:
        block = json.dumps({"decision": "block", "reason": message})
        fallback = (
            f'grep -Eq \'"prompt"[[:space:]]*:[[:space:]]*"[[:space:]]*/versions\' && '
            f"printf '%s\\n' {q(block)}; exit 0"
        )
    return (
        f'R="${{{launcher.CLI_ENV}:-}}"; [ -f "$R" ] && [ -x "$R" ] || R={q(recorded)}; '
        '[ -f "$R" ] && [ -x "$R" ] || R="$(command -v reef)"; '
        f'if [ -n "$R" ] && [ -x "$R" ]; then exec "$R" {call}; fi; {fallback}'
    )


def hook_config(
    release: ReleaseToInstall,
    target: Path,
    routing: Routing,
    reef_home: Path,
    binary: str,
    reef: str | None = None,
) -> str:
    data: dict[str, Any] = {
        "adapter": "claude-code",
        "scenario": release.scenario,
        "target": str(target),
        "reef_home": str(reef_home),
        "base_url": routing.base_url,
        "binary": binary,
        "reef_command": reef,
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
    reef: str | None = None,
) -> tuple[Plan, list[str]]:
    """The whole install, planned in memory; returns the plan and the skipped paths.

    ``reef`` is the `reef` executable the hooks record (default: this installation's)."""
    reef = reef if reef is not None else (launcher.current_cli() or "")
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
    plan.own(HOOK_CONFIG, hook_config(release, target, routing, reef_home, binary, reef))

    section = claude_md_section(tree, release.scenario, release.number)
    plan.merge(
        "CLAUDE.md",
        Merge(
            apply=lambda text: _files.with_section(text, section),
            remove=lambda text: _files.without_section(text) or None,
        ),
    )
    commands = {event: hook_command(arg, config, reef) for event, arg in EVENTS.items()}
    plan.merge(
        settings_json.REL,
        Merge(
            apply=lambda text: settings_json.merged(text, commands),
            remove=settings_json.unmerged,
        ),
    )
    plan.record = {**record, "skipped": skipped, "reef_command": reef}
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

"""Rendering a release into Claude Code's layout: the install plan.

=====================  ==========================================================
harness tree           Claude Code folder (``CLAUDE_CONFIG_DIR`` or a project's ``.claude/``)
=====================  ==========================================================
rules/<n>.md           ``CLAUDE.md``: one marked section, the person's text kept
skills/<n>/...         ``skills/<n>/...`` (Agent Skills format, copied as is)
commands/<n>.md        ``commands/<n>.md`` (frontmatter description, argument-hint)
extensions/<n>.ts      skipped: pi only (listed in the install record as ``skipped``)
reef.toml              not installed
(Reef's own)           ``commands/versions.md``, ``commands/evolve.md``,
                       ``commands/reload.md``, hooks in ``settings.json``,
                       ``.reef/hook.json`` (what the hook needs: scenario, target, REEF_HOME)
=====================  ==========================================================
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters import _files, _hook, _render
from adapters._files import InstallError, Merge, Plan
from adapters.base import ReleaseToInstall, Routing
from adapters.claude_code import settings_json
from reef_cli.core import launcher
from reef_cli.core.frontmatter import dump_frontmatter
from reef_cli.core.tree import parse_files

TEMPLATES = Path(__file__).parent / "templates"
HOOK_CONFIG = _hook.CONFIG
CLAUDE_MD = "CLAUDE.md"
VERSIONS_COMMAND = "commands/versions.md"
EVOLVE_COMMAND = "commands/evolve.md"
RELOAD_COMMAND = "commands/reload.md"
RESERVED_COMMANDS = frozenset({"versions", "evolve", "reload"})  # Reef's hook answers these


def _own_command(template: str, scenario: str, description: str, hint: str | None) -> str:
    """One of Reef's own command files: known to Claude Code, hidden from the model (the
    hook answers it, or for /reload adds the release to it)."""
    head: dict[str, object] = {"description": description}
    if hint is not None:
        head["argument-hint"] = hint
    head["disable-model-invocation"] = True
    page = _render.environment(TEMPLATES).get_template(template)
    return page.render(frontmatter=dump_frontmatter(head), scenario=scenario)


def versions_command(scenario: str) -> str:
    return _own_command(
        "versions_command.j2",
        scenario,
        f'Reef releases of "{scenario}": /versions, /versions N (what changed and why), '
        "/versions N install",
        "[N] [install]",
    )


def evolve_command(scenario: str) -> str:
    return _own_command(
        "evolve_command.j2",
        scenario,
        f'File an ask for Reef to change "{scenario}"\'s harness, e.g. /evolve always run '
        "the tests first",
        "<what the agent should do differently>",
    )


def reload_command(scenario: str) -> str:
    return _own_command(
        "reload_command.j2",
        scenario,
        f'Load the release of "{scenario}" installed here into this session (after /versions '
        "N install), without restarting",
        None,
    )


def hook_command(event_arg: str, config: Path, reef: str | None = None) -> str:
    """The shell command Claude Code runs for one hook event (``adapters._hook.command``)."""
    return _hook.command(
        "claude-code",
        event_arg,
        config,
        reef,
        versions="/versions, /evolve, /reload",
        typed="/(versions|evolve|reload)",
    )


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
            f"/{clash[0]} uses in Claude Code; nothing was installed",
            f"rename commands/{clash[0]}.md in the harness tree and publish again",
        )
    plan = Plan(target=target)
    owned, skipped = _render.copied(release, ("skills/", "commands/"))
    for rel, text in owned.items():
        plan.own(rel, text)
    plan.own(VERSIONS_COMMAND, versions_command(release.scenario))
    plan.own(EVOLVE_COMMAND, evolve_command(release.scenario))
    plan.own(RELOAD_COMMAND, reload_command(release.scenario))
    config = target / HOOK_CONFIG
    hook_config = _hook.config_text(
        "claude-code", release, target, routing, reef_home=reef_home, binary=binary, reef=reef
    )
    plan.own(HOOK_CONFIG, hook_config)

    section = _render.rules_section(tree, release.scenario, release.number)
    plan.merge(
        CLAUDE_MD,
        Merge(apply=lambda text: _files.with_section(text, section), remove=_files.unsection),
    )
    commands = {event: hook_command(arg, config, reef) for event, arg in _hook.EVENTS.items()}
    plan.merge(
        settings_json.REL,
        Merge(
            apply=lambda text: settings_json.merged(text, commands),
            remove=settings_json.unmerged,
        ),
    )
    plan.record = {**record, "skipped": skipped, "reef_command": reef}
    _files.refuse_overwrites(plan)
    return plan, skipped

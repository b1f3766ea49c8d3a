"""Rendering a release into Codex's layout (``CODEX_HOME``): the install plan.

=====================  ==========================================================
harness tree           Codex folder (``CODEX_HOME``, default ``~/.codex``)
=====================  ==========================================================
rules/<n>.md           ``AGENTS.md``: one marked section, the person's text kept
                       (``AGENTS.override.md`` when the person has one: Codex then
                       reads it instead of ``AGENTS.md``)
skills/<n>/...         ``skills/<n>/...`` (Agent Skills format, copied as is)
commands/<n>.md        ``skills/<n>/SKILL.md``, invoked as ``$<n>`` (0.171 reads no
                       custom prompts: ``/prompts:<n>`` is an unrecognised command),
                       plus ``agents/openai.yaml`` so only the person invokes it
extensions/<n>.ts      skipped: pi only (listed in the install record as ``skipped``)
reef.toml              not installed
(Reef's own)           ``reef.config.toml`` (the ``-p reef`` profile: provider, quiet
                       settings, hooks), ``skills/versions/`` (``$versions``),
                       ``.reef/hook.json`` (what the hook needs: scenario, target, REEF_HOME)
=====================  ==========================================================

``config.toml`` is the person's alone: Reef only checks that it parses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters import _files, _hook, _render
from adapters._files import InstallError, Merge, Plan
from adapters.base import ReleaseToInstall, Routing
from adapters.codex import profile
from reef_cli.core import launcher
from reef_cli.core.frontmatter import dump_frontmatter
from reef_cli.core.tree import Command, HarnessTree, parse_files

TEMPLATES = Path(__file__).parent / "templates"
HOOK_CONFIG = _hook.CONFIG
AGENTS = "AGENTS.md"
AGENTS_OVERRIDE = "AGENTS.override.md"
VERSIONS = "versions"
RESERVED = frozenset({VERSIONS})
EXPLICIT_ONLY = "agents/openai.yaml"
unsection = _files.unsection


def _template(name: str) -> Any:
    return _render.environment(TEMPLATES).get_template(name)


def versions_skill(scenario: str) -> str:
    head = {
        "name": VERSIONS,
        "description": f'Reef releases of "{scenario}": $versions, $versions N (what changed '
        "and why), $versions N install. Answered by Reef, with no model call.",
    }
    return _template("versions_skill.j2").render(
        frontmatter=dump_frontmatter(head), scenario=scenario
    )


def command_skill(command: Command) -> str:
    description = command.description
    if command.argument_hint:
        description += f" (arguments: {command.argument_hint})"
    head = {"name": command.name, "description": description}
    return _template("command_skill.j2").render(
        frontmatter=dump_frontmatter(head), name=command.name, body=command.body
    )


def explicit_only(name: str) -> str:
    return _template("explicit_only.yaml.j2").render(name=name)


def hook_command(event_arg: str, config: Path, reef: str | None = None) -> str:
    """The shell command Codex runs for one hook event (``adapters._hook.command``); with
    no `reef` at all, ``$versions`` (or ``/versions``) is still blocked."""
    return _hook.command(
        "codex", event_arg, config, reef, versions="$versions", typed="[$/]versions"
    )


def _tree_files(tree: HarnessTree, release: ReleaseToInstall) -> tuple[dict[str, str], list[str]]:
    """The release's own files at their Codex paths, and the paths skipped."""
    where = f"r{release.number}"
    names = {s.name for s in tree.skills} | {c.name for c in tree.commands}
    clash = sorted(RESERVED & names)
    if clash:
        raise InstallError(
            f"release {where} has a skill or command named {clash[0]!r}, which Reef's "
            "$versions uses in Codex; nothing was installed",
            f"rename {clash[0]} in the harness tree and publish again",
        )
    both = sorted({s.name for s in tree.skills} & {c.name for c in tree.commands})
    if both:
        raise InstallError(
            f"release {where} has both a skill and a command named {both[0]!r}; Codex runs "
            "commands as skills, so one would replace the other; nothing was installed",
            f"rename skills/{both[0]} or commands/{both[0]}.md and publish again",
        )
    owned, skipped = _render.copied(release, ("skills/",))
    for command in tree.commands:
        owned[f"skills/{command.name}/SKILL.md"] = command_skill(command)
        owned[f"skills/{command.name}/{EXPLICIT_ONLY}"] = explicit_only(command.name)
    return owned, skipped


def _rules_merges(target: Path, section: str) -> dict[str, Merge]:
    """Reef's section goes into the file Codex reads (``AGENTS.override.md`` when it
    exists, else ``AGENTS.md``); a section left in the other one by an earlier install is
    taken out."""
    texts = {rel: _files.read_text(target / rel) for rel in (AGENTS, AGENTS_OVERRIDE)}
    chosen = AGENTS_OVERRIDE if texts[AGENTS_OVERRIDE] is not None else AGENTS
    merges = {chosen: Merge(apply=lambda t: _files.with_section(t, section), remove=unsection)}
    other = AGENTS if chosen == AGENTS_OVERRIDE else AGENTS_OVERRIDE
    old = texts[other]
    if old is not None and _files.BEGIN in old:
        merges[other] = Merge(apply=lambda t: _files.without_section(t or ""), remove=unsection)
    return merges


def build_plan(
    release: ReleaseToInstall,
    target: Path,
    routing: Routing,
    *,
    reef_home: Path,
    binary: str,
    model: str,
    record: dict[str, Any],
    reef: str | None = None,
) -> Plan:
    """The whole install, planned in memory and checked before anything is written.

    ``reef`` is the `reef` executable the hooks record (default: this installation's)."""
    reef = reef if reef is not None else (launcher.current_cli() or "")
    profile.check_person_config(target)
    tree = parse_files(release.files, where=f"r{release.number}")
    owned, skipped = _tree_files(tree, release)
    owned[f"skills/{VERSIONS}/SKILL.md"] = versions_skill(release.scenario)
    owned[f"skills/{VERSIONS}/{EXPLICIT_ONLY}"] = explicit_only(VERSIONS)
    config = target / HOOK_CONFIG
    owned[HOOK_CONFIG] = _hook.config_text(
        "codex",
        release,
        target,
        routing,
        reef_home=reef_home,
        binary=binary,
        reef=reef,
        model=model,
    )
    commands = {event: hook_command(arg, config, reef) for event, arg in _hook.EVENTS.items()}
    profile_path = target / profile.REL
    old_profile = _files.read_text(profile_path)
    owned[profile.REL] = profile.render(
        routing, model, release.number, commands, profile_path, old=old_profile
    )
    plan = Plan(target=target)
    for rel, text in sorted(owned.items()):
        plan.own(rel, text)
    section = _render.rules_section(tree, release.scenario, release.number)
    for rel, merge in _rules_merges(target, section).items():
        plan.merge(rel, merge)
    _files.refuse_overwrites(plan, folders=("skills",))
    plan.record = {**record, "skipped": skipped, "reef_command": reef, "model": model}
    return plan

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

import json
import shlex
from pathlib import Path
from typing import Any

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from adapters import _files
from adapters._files import InstallError, Merge, Plan
from adapters.base import ReleaseToInstall, Routing
from adapters.codex import profile
from reef_cli.core import launcher
from reef_cli.core.tree import Command, HarnessTree, parse_files

TEMPLATES = Path(__file__).parent / "templates"
HOOK_CONFIG = f"{_files.STATE_DIR}/hook.json"
AGENTS = "AGENTS.md"
AGENTS_OVERRIDE = "AGENTS.override.md"
VERSIONS = "versions"
RESERVED = frozenset({VERSIONS})
EXPLICIT_ONLY = "agents/openai.yaml"
EVENTS = {"SessionStart": "session-start", "UserPromptSubmit": "user-prompt-submit"}

#: What a hook says when no `reef` command can be found at all (the venv moved or was
#: removed): a visible line at session start, and ``$versions`` blocked with the same text
#: (so it never goes to the model). Other prompts go on untouched.
MISSING = (
    "Reef: cannot find the `reef` command (the one recorded at install, {recorded}, is "
    "gone and there is none on PATH), so $versions and update notices are off. Put `reef` "
    "on PATH or install again: reef harness install --adapter codex --target {target}"
)


def _env() -> Environment:
    return Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        keep_trailing_newline=True,
        autoescape=False,
        undefined=StrictUndefined,
        trim_blocks=True,
    )


def _frontmatter(head: dict[str, Any]) -> str:
    return yaml.safe_dump(head, sort_keys=False, allow_unicode=True, width=1000)


def agents_section(tree: HarnessTree, scenario: str, number: int) -> str:
    template = _env().get_template("agents_md.j2")
    return template.render(scenario=scenario, number=number, rules=tree.rules)


def versions_skill(scenario: str) -> str:
    head = {
        "name": VERSIONS,
        "description": f'Reef releases of "{scenario}": $versions, $versions N (what changed '
        "and why), $versions N install. Answered by Reef, with no model call.",
    }
    template = _env().get_template("versions_skill.j2")
    return template.render(frontmatter=_frontmatter(head), scenario=scenario)


def command_skill(command: Command) -> str:
    description = command.description
    if command.argument_hint:
        description += f" (arguments: {command.argument_hint})"
    head = {"name": command.name, "description": description}
    template = _env().get_template("command_skill.j2")
    return template.render(frontmatter=_frontmatter(head), name=command.name, body=command.body)


def explicit_only(name: str) -> str:
    return _env().get_template("explicit_only.yaml.j2").render(name=name)


def hook_command(event_arg: str, config: Path, reef: str | None = None) -> str:
    """The shell command Codex runs for one hook event: ``reef hook codex EVENT --config F``
    with ``reef`` resolved when the hook runs: ``$REEF_CLI`` (set by `reef-codex`), the
    path recorded here at install, then ``reef`` on ``PATH``; with none, a visible line."""
    recorded = reef if reef is not None else (launcher.current_cli() or "")
    q = shlex.quote
    call = f"hook codex {event_arg} --config {q(str(config))}"
    message = MISSING.format(recorded=recorded or "(none)", target=config.parent.parent)
    if event_arg == "session-start":
        fallback = f"printf '%s\\n' {q(json.dumps({'systemMessage': message}))}"
    else:
        block = json.dumps({"decision": "block", "reason": message})
        fallback = (
            'grep -Eq \'"prompt"[[:space:]]*:[[:space:]]*"[[:space:]]*[$/]versions\' && '
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
    *,
    reef_home: Path,
    binary: str,
    model: str,
    reef: str | None,
) -> str:
    data: dict[str, Any] = {
        "adapter": "codex",
        "scenario": release.scenario,
        "target": str(target),
        "reef_home": str(reef_home),
        "base_url": routing.base_url,
        "binary": binary,
        "model": model,
        "reef_command": reef,
    }
    return json.dumps(data, indent=2) + "\n"


def _read_text(path: Path) -> str | None:
    if not path.is_file():
        return None
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InstallError(
            f"{path} is not UTF-8 text; nothing was installed",
            f"save {path.name} as UTF-8, then install again",
        ) from exc


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
    owned: dict[str, str] = {}
    skipped: list[str] = []
    for rel, text in release.files.items():
        if rel.startswith("skills/"):
            owned[rel] = text
        elif rel.startswith("extensions/"):
            skipped.append(rel)  # pi extensions: Codex has no equivalent
    for command in tree.commands:
        owned[f"skills/{command.name}/SKILL.md"] = command_skill(command)
        owned[f"skills/{command.name}/{EXPLICIT_ONLY}"] = explicit_only(command.name)
    return owned, sorted(skipped)


def _conflicts(target: Path, owned: dict[str, str]) -> list[str]:
    """Owned paths that would overwrite the person's own files (not Reef's from before),
    or land in a skill folder of theirs."""
    previous = set((_files.load_manifest(target) or {}).get("owned", []))
    found: set[str] = set()
    for rel in sorted(owned):
        if rel in previous or rel.startswith(f"{_files.STATE_DIR}/"):
            continue
        path = target / rel
        if path.exists() or path.is_symlink():
            found.add(rel)
            continue
        parts = rel.split("/")
        if parts[0] == "skills" and len(parts) > 2:
            folder = "/".join(parts[:2])
            ours = any(p.startswith(folder + "/") for p in previous)
            if (target / folder).exists() and not ours:
                found.add(folder + "/")
    return sorted(found)


def _rules_merges(target: Path, section: str) -> dict[str, Merge]:
    """Reef's section goes into the file Codex reads (``AGENTS.override.md`` when it
    exists, else ``AGENTS.md``); a section left in the other one by an earlier install is
    taken out."""
    texts = {rel: _read_text(target / rel) for rel in (AGENTS, AGENTS_OVERRIDE)}
    chosen = AGENTS_OVERRIDE if texts[AGENTS_OVERRIDE] is not None else AGENTS
    merges = {chosen: Merge(apply=lambda t: _files.with_section(t, section), remove=unsection)}
    other = AGENTS if chosen == AGENTS_OVERRIDE else AGENTS_OVERRIDE
    old = texts[other]
    if old is not None and _files.BEGIN in old:
        merges[other] = Merge(apply=lambda t: _files.without_section(t or ""), remove=unsection)
    return merges


def unsection(text: str) -> str | None:
    """A rules file without Reef's section; None when nothing else is left in it."""
    left = _files.without_section(text)
    return left if left.strip() else None


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
    owned[HOOK_CONFIG] = hook_config(
        release, target, routing, reef_home=reef_home, binary=binary, model=model, reef=reef
    )
    commands = {event: hook_command(arg, config, reef) for event, arg in EVENTS.items()}
    profile_path = target / profile.REL
    old_profile = _read_text(profile_path)
    owned[profile.REL] = profile.render(
        routing, model, release.number, commands, profile_path, old=old_profile
    )
    conflicts = _conflicts(target, owned)
    if conflicts:
        raise InstallError(
            f"installing would overwrite your own {', '.join(conflicts)} in {target}; "
            "nothing was installed",
            "rename or move those files (or the skill/command in the release), then install again",
        )
    plan = Plan(target=target)
    for rel, text in sorted(owned.items()):
        plan.own(rel, text)
    section = agents_section(tree, release.scenario, release.number)
    for rel, merge in _rules_merges(target, section).items():
        plan.merge(rel, merge)
    for rel in plan.merged:
        path = target / rel
        if path.exists() and not path.is_file():
            raise InstallError(
                f"{path} is not a regular file; nothing was installed", f"move {rel} aside"
            )
    plan.record = {**record, "skipped": skipped, "reef_command": reef, "model": model}
    return plan

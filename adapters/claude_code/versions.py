"""What `/versions` says inside an agent: the chain, one release, or an install.

Pure text builders over Reef's core (scenarios, releases, diff); the hook wraps them in
the agent's ``{"decision": "block", "reason": ...}`` so no model call is made. ``command``
is how the person types it: ``/versions`` in Claude Code, ``$versions`` in Codex.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reef_cli.core.errors import ReefError

if TYPE_CHECKING:
    from adapters.base import Adapter
    from reef_cli.core.releases import Chain, Release

COMMAND = "/versions"
MAX_LIST = 20
MAX_DIFF_LINES = 80


def usage(command: str = COMMAND) -> str:
    return (
        f"Usage: {command} (list releases) · {command} N (what changed and why) · "
        f"{command} N install (install release N here)"
    )


USAGE = usage()


class UsageError(ReefError):
    """A /versions command Reef does not understand."""

    http_status = 400


@dataclass(frozen=True)
class Request:
    action: str  # list | show | install
    spec: str | None = None


def parse(prompt: str, command: str = COMMAND, also: tuple[str, ...] = ()) -> Request | None:
    """``/versions …`` (``command``, or a spelling in ``also``) -> a request; None for any
    other prompt (it goes to the model)."""
    text = prompt.strip()
    spelling = next(
        (s for s in (command, *also) if text == s or text.startswith((s + " ", s + "\n"))),
        None,
    )
    if spelling is None:
        return None
    words = text[len(spelling) :].split()
    if not words:
        return Request("list")
    if len(words) == 1 and words[0].lower() not in ("install",):
        return Request("show", words[0])
    if len(words) == 2 and words[1].lower() == "install":
        return Request("install", words[0])
    raise UsageError(f"I don't understand `{text}`.", usage(command))


def answer(
    config: dict[str, Any],
    prompt: str,
    installed: int | None,
    *,
    command: str = COMMAND,
    also: tuple[str, ...] = (),
    install: Callable[[dict[str, Any], str, int | None], str] | None = None,
) -> str | None:
    """The text that answers a ``command`` prompt; None for any other prompt. ``install``
    does ``command N install`` (default: into Claude Code)."""
    request = parse(prompt, command, also)
    if request is None:
        return None
    scenario = config["scenario"]
    if request.action == "list":
        return list_text(scenario, installed, command)
    if request.action == "show":
        return show_text(scenario, str(request.spec), installed, command)
    return (install or _install_claude_code)(config, str(request.spec), installed)


def _state(scenario: str) -> tuple[Chain, list[Release]]:
    from reef_cli.core import scenarios

    chain = scenarios.get(scenario).chain()
    return chain, chain.releases()


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 72 else line[:71] + "…"


def notice(
    scenario: str, installed: int | None, agent: str = "Claude Code", command: str = COMMAND
) -> tuple[str | None, str]:
    """(update notice or None, context for the model) for a new session in ``agent``."""
    chain, _ = _state(scenario)
    served = chain.served()
    here = f"r{installed}" if installed else "no release"
    context = (
        f'Reef manages this {agent} harness: scenario "{scenario}", {here} installed. '
        f"The user can type {command} to list releases, {command} N to see what changed and "
        f"why, and {command} N install to switch; those commands are answered without you."
    )
    if served is None or installed is None or served.number <= installed:
        return None, context
    number = served.number
    text = f"Reef r{installed} installed — r{number} available ({command} {number} install)"
    return text, context + f" {text}."


def list_text(scenario: str, installed: int | None, command: str = COMMAND) -> str:
    chain, releases = _state(scenario)
    if not releases:
        return f'Reef scenario "{scenario}" has no releases yet.'
    served = chain.served()
    latest = releases[-1]
    head = f'Reef scenario "{scenario}": ' + (
        f"installed r{installed}" if installed else "nothing installed"
    )
    head += f", latest r{latest.number}"
    if served and served.number != latest.number:
        head += f", served r{served.number}"
    lines = [head, ""]
    for release in list(reversed(releases))[:MAX_LIST]:
        meta = release.meta
        marks = []
        if installed == release.number:
            marks.append("installed")
        if served and served.number == release.number and installed != release.number:
            marks.append("available" if installed and release.number > installed else "served")
        source = meta.source + (f"→r{meta.points_to}" if meta.points_to else "")
        mark = f"  ← {', '.join(marks)}" if marks else ""
        lines.append(
            f"  r{release.number:<3} {meta.created_at[:16].replace('T', ' ')}  {meta.status:<7} "
            f"{source:<12} {_first_line(meta.reason)}{mark}"
        )
    if len(releases) > MAX_LIST:
        lines.append(
            f"  … and {len(releases) - MAX_LIST} older (reef harness versions -s {scenario})"
        )
    lines += _proposal_lines(scenario)
    lines += ["", f"{command} N shows what changed and why · {command} N install installs it"]
    return "\n".join(lines)


def _proposal_lines(scenario: str) -> list[str]:
    """Releases waiting for a person (a recipe's proposal under ``publish: review``, or
    unreviewed extension code): what they are and how to decide."""
    from reef_cli.core import proposals, scenarios

    waiting = proposals.pending(scenarios.get(scenario))
    if not waiting:
        return []
    lines = ["", "Proposals waiting for review:"]
    for proposal in waiting:
        release = proposal.release
        lines.append(
            f"  r{release.number:<3} held for {proposal.held_for}: "
            f"{_first_line(release.meta.reason)}"
        )
    lines.append("  reef harness promote N · reef harness reject N")
    return lines


def show_text(scenario: str, spec: str, installed: int | None, command: str = COMMAND) -> str:
    from reef_cli.core import scenarios
    from reef_cli.core.diff import diff_trees

    found_in = scenarios.get(scenario)
    chain = found_in.chain()
    release = found_in.chain().resolve(spec, installed)
    meta = release.meta
    when = meta.created_at[:19].replace("T", " ")
    lines = [
        f'r{release.number} of "{scenario}" — {meta.status}, {when}',
        f"source: {meta.source}"
        + (f" (content of r{meta.points_to})" if meta.points_to else "")
        + (f", recipe {meta.recipe}" if meta.recipe else ""),
        f"why: {meta.reason or '(no reason given)'}",
    ]
    gate: dict[str, Any] = meta.gate or {}
    if gate:
        failed = [c.get("name") for c in gate.get("checks", []) if c.get("status") != "passed"]
        lines.append(
            f"gate: {gate.get('verdict', '-')}"
            + (f" (not passed: {', '.join(map(str, failed))})" if failed else "")
        )
        for check in gate.get("checks", []):  # the verdict's numbers
            lines.append(
                f"  {check.get('status', '')} {check.get('name', '')}: {check.get('detail', '')}"
            )
            lines.extend(f"    {finding}" for finding in check.get("findings", [])[:8])
    base_number = installed if installed and installed != release.number else meta.parent
    if base_number:
        base = chain.get(base_number)
        label = "installed" if base_number == installed else "parent"
        changes = diff_trees(chain.files(base), chain.files(release), base.tag, release.tag)
        if not changes:
            lines.append(f"changes from r{base_number} ({label}): none, same content")
        else:
            lines.append(f"changes from r{base_number} ({label}):")
            for change in changes:
                lines.append(
                    f"  {change.status:<8} {change.path} (+{change.added} -{change.removed})"
                )
            diff = "".join(c.diff for c in changes).splitlines()
            lines.append("")
            lines += diff[:MAX_DIFF_LINES]
            if len(diff) > MAX_DIFF_LINES:
                lines.append(
                    f"… {len(diff) - MAX_DIFF_LINES} more lines: "
                    f"reef harness diff {base_number} {release.number} -s {scenario}"
                )
    else:
        lines.append("changes: the first release")
    if installed != release.number:
        lines += ["", f"{command} {release.number} install installs it here"]
    else:
        lines += ["", "this release is installed here"]
    return "\n".join(lines)


def install_text(
    config: dict[str, Any],
    spec: str,
    installed: int | None,
    adapter: Adapter,
    reads: str,
    then: str = "start a new session to use it",
) -> str:
    """Install release ``spec`` with ``adapter`` into the same folder, with the same
    routing; ``reads`` says what the agent reads when a session starts, ``then`` how to
    use the new release."""
    from adapters._install import release_to_install
    from adapters.base import Routing
    from reef_cli.core import installs

    scenario = config["scenario"]
    target = Path(config["target"])
    release = release_to_install(scenario, spec, adapter=adapter.name)
    if installed == release.number:
        return f'r{release.number} of "{scenario}" is already installed in {target}.'
    routing = Routing(base_url=config.get("base_url") or "http://127.0.0.1:8901", scenario=scenario)
    adapter.install(release, target, routing)
    installs.record(scenario, adapter.name, target, release.number, release.content_hash)
    was = f" (was r{installed})" if installed else ""
    return (
        f'Installed r{release.number} of "{scenario}" into {target}{was}.\n'
        f"{reads} when a session starts: {then}."
    )


def _install_claude_code(config: dict[str, Any], spec: str, installed: int | None) -> str:
    from adapters.claude_code.adapter import ClaudeCodeAdapter

    adapter = ClaudeCodeAdapter(binary=config.get("binary"))
    return install_text(
        config,
        spec,
        installed,
        adapter,
        "Claude Code reads CLAUDE.md, skills and commands",
        "start a new session to use it, or type /reload to load it into this one",
    )

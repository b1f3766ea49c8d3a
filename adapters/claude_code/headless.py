"""Running Claude Code through `reef serve`: the environment, and headless ``-p`` runs.

Verified against Claude Code 2.1.332:

- ``ANTHROPIC_BASE_URL`` moves every model call to Reef (``POST /v1/messages?beta=true``);
  ``ANTHROPIC_CUSTOM_HEADERS`` (one ``Name: value`` per line) adds ``x-reef-scenario``;
  ``ANTHROPIC_AUTH_TOKEN`` is sent as ``Authorization: Bearer`` and, unlike
  ``ANTHROPIC_API_KEY``, never triggers the "use this API key?" prompt. A person's own
  ``ANTHROPIC_API_KEY`` would be sent too (as ``x-api-key``), so it is blanked.
- ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` alone stops ``-p`` runs resolving any
  host (no telemetry, no ``HEAD /api/hello``); interactive sessions also looked up
  downloads.claude.ai and github.com until ``DISABLE_UPDATES`` and
  ``CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL`` were set (checked with strace).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from adapters import _record
from adapters.base import Exit, Routing, Session, Transcript
from reef_cli.core import launcher

#: Non-essential traffic off, so Claude Code talks only to `reef serve`.
QUIET_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_UPDATES": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
    "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
    # Another provider switched on in the person's shell would bypass Reef.
    "CLAUDE_CODE_USE_BEDROCK": "0",
    "CLAUDE_CODE_USE_VERTEX": "0",
    "CLAUDE_CODE_USE_FOUNDRY": "0",
}
NO_TOKEN = "reef-open"  # a placeholder: Claude Code refuses to start without a credential


def default_config_dir() -> Path:
    override = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(override).expanduser() if override else Path.home() / ".claude"


def is_project_dir(target: Path) -> bool:
    """A project's ``.claude/`` (settings there load by cwd) vs a config dir."""
    resolved = target.expanduser().resolve()
    return resolved.name == ".claude" and resolved != default_config_dir().resolve()


def config_dir_for(target: Path) -> Path:
    """Where Claude Code keeps ``projects/`` (transcripts) for sessions using ``target``."""
    return default_config_dir() if is_project_dir(target) else target


def custom_headers(routing: Routing, environ: Mapping[str, str], release: int | None = None) -> str:
    """``ANTHROPIC_CUSTOM_HEADERS``: the scenario, the Reef session when set, and the
    installed ``release`` (``x-reef-release-id``, so records are credited to it)."""
    lines = [f"x-reef-scenario: {routing.scenario}"]
    session = environ.get(routing.session_env)
    if session:
        lines.append(f"x-reef-session: {session}")
    if release is not None and release > 0:  # a trial's candidate (0) is no release
        lines.append(f"{launcher.RELEASE_HEADER}: {int(release)}")
    return "\n".join(lines)


def wrapper_env(
    target: Path, routing: Routing, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The variables to add to the caller's environment (they win over inherited ones).

    The token comes from ``environ[routing.token_env]`` only: the wrapper puts its token
    there before it asks for this (reef_cli/cli/wrappers.py), as it does for pi."""
    environ = os.environ if environ is None else environ
    env = {
        "ANTHROPIC_BASE_URL": routing.base_url.rstrip("/"),
        "ANTHROPIC_CUSTOM_HEADERS": custom_headers(routing, environ, _record.release_of(target)),
        "ANTHROPIC_AUTH_TOKEN": environ.get(routing.token_env) or NO_TOKEN,
        "ANTHROPIC_API_KEY": "",
        **QUIET_ENV,
        **launcher.agent_env(),  # the hooks run this `reef`, wherever the venv is now
    }
    if not is_project_dir(target):
        env["CLAUDE_CONFIG_DIR"] = str(target.expanduser().resolve())
    return env


def find_transcript(config_dir: Path, session_id: str) -> Path | None:
    found = sorted((config_dir / "projects").glob(f"*/{session_id}.jsonl"))
    return found[0] if found else None


def run(
    argv: Sequence[str],
    env: Mapping[str, str],
    workdir: Path,
    timeout: float,
    session_id: str,
    config_dir: Path,
    stdin: str | None = None,
) -> Transcript:
    """Run ``argv`` in its own process group; on timeout kill the group (rc 124)."""
    from adapters._process import run_group

    done = run_group(list(argv), workdir, dict(env), timeout, stdin)
    return transcript_of(done, config_dir, session_id)


def session_of(config_dir: Path, session_id: str) -> Session | None:
    """The session Claude Code wrote under ``session_id``, if any."""
    from adapters.claude_code.harvest import parse_transcript

    path = find_transcript(config_dir, session_id)
    return parse_transcript(path) if path is not None else None


def transcript_of(done: Exit, config_dir: Path, session_id: str) -> Transcript:
    """A finished run plus the session Claude Code wrote under ``session_id``, if any."""
    return Transcript(
        returncode=done.returncode,
        stdout=done.stdout,
        stderr=done.stderr,
        session=session_of(config_dir, session_id),
        timed_out=done.timed_out,
        isolation=done.isolation,
    )

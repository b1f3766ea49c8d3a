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

import contextlib
import os
import signal
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from adapters.base import Routing, Session, Transcript

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


def custom_headers(routing: Routing, environ: Mapping[str, str]) -> str:
    lines = [f"x-reef-scenario: {routing.scenario}"]
    session = environ.get(routing.session_env)
    if session:
        lines.append(f"x-reef-session: {session}")
    return "\n".join(lines)


def wrapper_env(
    target: Path, routing: Routing, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The variables to add to the caller's environment (they win over inherited ones)."""
    environ = os.environ if environ is None else environ
    env = {
        "ANTHROPIC_BASE_URL": routing.base_url.rstrip("/"),
        "ANTHROPIC_CUSTOM_HEADERS": custom_headers(routing, environ),
        "ANTHROPIC_AUTH_TOKEN": environ.get(routing.token_env) or NO_TOKEN,
        "ANTHROPIC_API_KEY": "",
        **QUIET_ENV,
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
    from adapters.claude_code.harvest import parse_transcript

    proc = subprocess.Popen(
        list(argv),
        cwd=workdir,
        env=dict(env),
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        err = (err or "") + f"\nreef: claude did not finish within {timeout:g}s and was stopped\n"
        code = 124
    session: Session | None = None
    path = find_transcript(config_dir, session_id)
    if path is not None:
        session = parse_transcript(path)
    return Transcript(returncode=code, stdout=out or "", stderr=err or "", session=session)


def new_session_id() -> str:
    return str(uuid.uuid4())

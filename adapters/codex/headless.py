"""Running Codex through `reef serve`: the environment, the ``-p reef`` profile argument,
and finding the rollout a run wrote.

Verified against Codex CLI 0.171.0 (commands in docs/adapters-codex.md):

- ``CODEX_HOME`` is the agent folder (default ``~/.codex``); Codex canonicalises it.
- ``-p/--profile`` is accepted only by the runtime commands (the TUI, ``exec``, ``review``,
  ``resume``, ``fork``, ``mcp`` …); ``login``, ``doctor``, ``features`` … refuse it, so
  the wrapper adds it only where it applies.
- ``codex exec`` needs ``--skip-git-repo-check`` outside a git repository, reads the
  prompt from stdin when it is not closed, and runs with approvals ``never``.
- Codex's own sandbox (``--sandbox workspace-write``) runs each command through bwrap and
  a ``codex-linux-sandbox`` helper that Codex links into ``CODEX_HOME/tmp/arg0*`` at start,
  but it refuses to create helpers when ``CODEX_HOME`` is under the temp dir ("Refusing to
  create helper binaries under temporary dir /tmp"), and every command then fails with
  ``bwrap: execvp codex-linux-sandbox``. So ``TMPDIR`` points into the agent folder, and
  under a caller's isolation (a ``Launch``: Reef's bwrap sandbox, where nesting another
  user namespace is not dependable) Codex's sandbox is bypassed instead.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from adapters._process import new_session_id
from adapters.base import Routing, Session
from adapters.codex import profile
from reef_cli.core import launcher

NO_TOKEN = "reef-open"  # Codex refuses to start when the provider's env_key is unset
#: Sub-commands that take ``-p`` (from the error 0.171 prints for the others).
PROFILE_COMMANDS = frozenset(
    {"exec", "e", "review", "resume", "queue", "archive", "delete", "unarchive", "fork"}
    | {"mcp", "migrate-nfs-db", "sandbox"}
)
SUBCOMMANDS = PROFILE_COMMANDS | frozenset(
    {"agents", "login", "logout", "plugin", "app-server", "remote-control", "completion"}
    | {"update", "doctor", "debug", "apply", "a", "migrate-rollouts", "cloud", "exec-server"}
    | {"features", "help"}
)
#: Global options that take a value (the value is not a sub-command).
VALUE_OPTIONS = frozenset(
    {"-c", "--config", "--enable", "--disable", "--remote", "--remote-auth-token-env"}
    | {"-i", "--image", "-m", "--model", "--local-provider", "-s", "--sandbox"}
    | {"-C", "--cd", "--add-dir", "-a", "--ask-for-approval"}
)
#: ``codex exec`` flags for every headless run: no git-repo check, plain output.
EXEC_FLAGS = ("--skip-git-repo-check", "--color", "never")
#: Unisolated: Codex's own sandbox keeps writes to the work dir (and the temp dirs).
OWN_SANDBOX = ("--sandbox", "workspace-write")
#: Inside the caller's isolation: Codex's sandbox off (approvals are ``never`` in exec).
OUTER_SANDBOX = ("--dangerously-bypass-approvals-and-sandbox",)
TMP_DIR = ".reef-tmp"  # TMPDIR, inside the agent folder (see the module docstring)


def default_codex_home() -> Path:
    override = os.environ.get("CODEX_HOME")
    return Path(override).expanduser() if override else Path.home() / ".codex"


def _subcommand(argv: Sequence[str]) -> str | None:
    """The sub-command ``argv`` runs, or None for the interactive TUI (maybe a prompt)."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--":
            return None
        elif arg.startswith("-"):
            skip = arg in VALUE_OPTIONS
        else:
            return arg if arg in SUBCOMMANDS else None
    return None


def with_profile(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``-p reef`` in front where Codex takes a profile (not when the
    person picked one)."""
    args = list(argv)
    if any(a in ("-p", "--profile") or a.startswith("--profile=") for a in args):
        return args
    command = _subcommand(args)
    if command is None or command in PROFILE_COMMANDS:
        return ["-p", profile.NAME, *args]
    return args


def wrapper_env(
    target: Path,
    routing: Routing,
    environ: Mapping[str, str] | None = None,
    session_id: str | None = None,
) -> dict[str, str]:
    """The variables to lay over the caller's environment: ``CODEX_HOME``, the token the
    profile's ``env_key`` names (the wrapper puts it in the environment first), a Reef
    session id (sent as ``x-reef-session``) and ``REEF_CLI`` for the hooks."""
    environ = os.environ if environ is None else environ
    return {
        "CODEX_HOME": str(Path(target).expanduser().absolute()),
        routing.token_env: environ.get(routing.token_env) or NO_TOKEN,
        routing.session_env: session_id or new_session_id(),
        **launcher.agent_env(),  # the hooks run this `reef`, wherever the venv is now
    }


def exec_argv(binary: str, prompt: str, *, isolated: bool) -> list[str]:
    """``codex exec -p reef … -- PROMPT`` (``--``: a prompt may start with a dash);
    ``isolated``: the caller's ``Launch`` isolates the run, so Codex's sandbox is off."""
    sandbox = OUTER_SANDBOX if isolated else OWN_SANDBOX
    return [binary, "exec", "-p", profile.NAME, *EXEC_FLAGS, *sandbox, "--", prompt]


def tmp_dir(codex_home: Path) -> Path:
    """A ``TMPDIR`` outside the system temp dir, so Codex creates its helper links."""
    path = codex_home / TMP_DIR
    path.mkdir(parents=True, exist_ok=True)
    return path


def rollouts_since(codex_home: Path, started: float) -> list[Path]:
    """Rollouts written since ``started`` (a ``time.time()``), oldest first."""
    from adapters.codex.harvest import rollout_files

    found = []
    for path in rollout_files(codex_home):
        try:
            if path.stat().st_mtime >= started - 1:
                found.append(path)
        except OSError:
            continue
    return sorted(found, key=lambda p: p.stat().st_mtime)


def session_of(codex_home: Path, started: float, reef_session: str) -> Session | None:
    """The session a run wrote: the newest rollout since ``started``. Its receipts come
    later, from ``harvest`` (the recorder may not have stored the records yet)."""
    from adapters.codex.harvest import parse_rollout

    found = rollouts_since(codex_home, started)
    if not found:
        return None
    session = parse_rollout(found[-1])
    session.reef_session_id = reef_session
    return session

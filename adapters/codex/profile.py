"""Reef's Codex profile, ``$CODEX_HOME/reef.config.toml``: how Codex reaches `reef serve`.

Codex 0.171 layers ``$CODEX_HOME/<name>.config.toml`` over the person's ``config.toml``
when it runs with ``-p/--profile <name>`` (verified with ``--strict-config``), and a
profile may define model providers and hooks. So Reef never edits ``config.toml``: the
wrapper and headless runs pass ``-p reef``, and this file, which Reef owns, holds

- ``model_provider = "reef"`` and ``[model_providers.reef]``: ``base_url`` (serve + ``/v1``),
  ``wire_api = "responses"``, ``env_key = "REEF_TOKEN"`` (the token stays in the
  environment, Codex sends it as ``Authorization: Bearer``), ``http_headers``
  (``x-reef-scenario``, ``x-reef-release-id``) and ``env_http_headers`` (``x-reef-session``
  from ``REEF_SESSION_ID``; Codex leaves it out when the variable is unset);
- what stops start-up traffic other than serve: ``[analytics] enabled = false``
  (ab.chatgpt.com), ``[features] plugins = false`` (github.com/openai/plugins.git,
  api.github.com, chatgpt.com), ``check_for_update_on_startup = false`` (the TUI's release
  check);
- the ``SessionStart`` and ``UserPromptSubmit`` hooks (``/versions``, the update notice)
  and their trust: Codex runs a person-level hook only when ``[hooks.state."<file>:<event>
  :<group>:<handler>"] trusted_hash`` matches the hook (``trusted_hash``).

Codex writes into the active profile too (``[projects."<dir>"] trust_level`` when a
folder is trusted, ``[tui]`` flags): those tables are kept when Reef rewrites the file.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from adapters._files import InstallError
from adapters.base import Routing
from reef_cli.core import launcher

NAME = "reef"  # `codex -p reef`
REL = f"{NAME}.config.toml"
PROVIDER = "reef"
HOOK_TIMEOUT = 30  # seconds
#: Event -> the label Codex uses in hook-state keys.
EVENTS = {"SessionStart": "session_start", "UserPromptSubmit": "user_prompt_submit"}
#: Top-level keys Reef writes; every other one in an existing profile is Codex's and stays.
REEF_KEYS = frozenset(
    {"model_provider", "model", "check_for_update_on_startup", "analytics", "model_providers"}
)
QUIET = {"analytics": {"enabled": False}, "features": {"plugins": False}}
HEADER = (
    "# Reef's Codex profile, used as `codex -p reef` (reef-codex passes it). Managed by\n"
    "# Reef: rewritten on every install, removed on uninstall. Tables Codex adds are kept.\n"
)


def trusted_hash(event: str, command: str, timeout: int = HOOK_TIMEOUT) -> str:
    """The ``trusted_hash`` Codex 0.171 computes for one command hook: sha256 of the
    canonical (sorted, compact) JSON of the hook's normalised identity. An install whose
    hash Codex does not recognise leaves the hook untrusted, so it silently does not run;
    tests/e2e/test_codex.py checks it with the real binary."""
    identity = {
        "event_name": EVENTS[event],
        "hooks": [{"type": "command", "command": command, "timeout": timeout, "async": False}],
    }
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def hooks_table(commands: dict[str, str], profile_path: Path) -> dict[str, Any]:
    """``[hooks]``: one group per event, each trusted under the profile's real path (Codex
    canonicalises ``CODEX_HOME``, so a symlinked target is keyed by where it points)."""
    source = str(profile_path.resolve())
    table: dict[str, Any] = {}
    state: dict[str, Any] = {}
    for event, command in commands.items():
        hook = {"type": "command", "command": command, "timeout": HOOK_TIMEOUT}
        table[event] = [{"hooks": [hook]}]
        state[f"{source}:{EVENTS[event]}:0:0"] = {"trusted_hash": trusted_hash(event, command)}
    table["state"] = state
    return table


def provider(routing: Routing, release: int | None) -> dict[str, Any]:
    headers = {"x-reef-scenario": routing.scenario}
    if release is not None and release > 0:  # a trial's candidate (0) is no release
        headers[launcher.RELEASE_HEADER] = str(int(release))
    return {
        "name": "Reef",
        "base_url": routing.base_url.rstrip("/") + "/v1",
        "wire_api": "responses",
        "env_key": routing.token_env,
        "http_headers": headers,
        "env_http_headers": {"x-reef-session": routing.session_env},
    }


def codex_written(old: str | None) -> dict[str, Any]:
    """What Codex wrote into an existing profile (kept on reinstall); nothing when the file
    is absent or no longer parses (it is Reef's file: it is rewritten)."""
    if not old:
        return {}
    try:
        data = tomllib.loads(old)
    except tomllib.TOMLDecodeError:
        return {}
    kept = {k: v for k, v in data.items() if k not in REEF_KEYS | {"hooks", "features"}}
    features = data.get("features")
    if isinstance(features, dict):
        others = {k: v for k, v in features.items() if k not in QUIET["features"]}
        if others:
            kept["features"] = others
    return kept


def render(
    routing: Routing,
    model: str,
    release: int | None,
    commands: dict[str, str],
    profile_path: Path,
    old: str | None = None,
) -> str:
    """The whole profile text: Reef's settings, then what Codex had written into it."""
    kept = codex_written(old)
    features = {**kept.pop("features", {}), **QUIET["features"]}
    data: dict[str, Any] = {
        "model_provider": PROVIDER,
        "model": model,
        "check_for_update_on_startup": False,
        "analytics": dict(QUIET["analytics"]),
        "features": features,
        "model_providers": {PROVIDER: provider(routing, release)},
        "hooks": hooks_table(commands, profile_path),
    }
    text = HEADER + "\n" + tomli_w.dumps(data)
    if kept:
        text += "\n# Written by Codex (kept across Reef installs)\n" + tomli_w.dumps(kept)
    return text


def installed(text: str) -> dict[str, Any]:
    """The profile's parsed settings (for ``installed()`` and tests); {} when unreadable."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def check_person_config(target: Path) -> None:
    """The person's ``config.toml`` must parse (Codex refuses to start otherwise) and must
    not define a ``reef`` provider of its own (the profile would be merged into it key by
    key). Raises ``InstallError``; Reef never writes this file."""
    path = target / "config.toml"
    if not path.exists():
        return
    if not path.is_file():
        raise InstallError(
            f"{path} is not a regular file; nothing was installed", "move config.toml aside"
        )
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InstallError(
            f"{path} is not UTF-8 text; nothing was installed",
            "save config.toml as UTF-8, then install again",
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise InstallError(
            f"{path} is not valid TOML ({exc}); nothing was installed",
            "fix config.toml (Codex cannot start with it either), then install again",
        ) from exc
    providers = data.get("model_providers")
    if isinstance(providers, dict) and PROVIDER in providers:
        raise InstallError(
            f"{path} defines its own [model_providers.{PROVIDER}], which Reef's profile "
            "would be merged into; nothing was installed",
            f"rename that provider in config.toml (e.g. [model_providers.my-{PROVIDER}])",
        )

"""The ``reef`` provider in pi's ``models.json``: put in, take out, read back.

Both supported pi versions (1.6 and 0.73) resolve an ``apiKey`` or header value that
starts with ``!`` by running it with ``/bin/sh`` and using its stdout. Other forms differ
(1.6 reads ``$NAME``, 0.73 reads a bare variable name first and falls back to the literal),
so every dynamic value here is a ``!command``. Both fail the request when a header
command prints nothing, so each command ends with a fallback that always prints.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from adapters._files import (
    InstallError,
    dump_json,
    parse_json_object,
    person_json_object,
    read_json_object,
)
from adapters.base import Routing
from reef_cli.core.launcher import RELEASE_HEADER

PROVIDER = "reef"
REL = "models.json"
NO_TOKEN = "reef-no-token"  # what pi sends when no token is set: an open `reef serve` accepts it


def provider_entry(
    routing: Routing, models: list[str], token_file: Path | None, release: int | None = None
) -> dict[str, Any]:
    """The provider object: OpenAI chat completions at ``reef serve``, with Reef's headers.

    ``release`` (the release being installed) goes out as ``x-reef-release-id`` on every
    request, so records are credited to what is installed, not to what is served. Every
    install renders this file again, so the header follows ``/versions N install``."""
    key = f"printenv {routing.token_env}"
    if token_file is not None:
        key += f" || cat {shlex.quote(str(token_file))} 2>/dev/null"
    headers = {
        "x-reef-scenario": f"!echo {shlex.quote(routing.scenario)}",
        "x-reef-session": f"!printenv {routing.session_env} || echo none",
    }
    if release is not None and release > 0:  # a trial's candidate (0) is no release
        headers[RELEASE_HEADER] = f"!echo {int(release)}"
    return {
        "name": f"Reef ({routing.scenario})",
        "baseUrl": routing.base_url.rstrip("/") + "/v1",
        "api": "openai-completions",
        "apiKey": f"!{key} || echo {NO_TOKEN}",
        "headers": headers,
        "models": [{"id": model, "name": f"{model} (Reef)"} for model in models],
    }


def _with_providers(data: dict[str, Any], where: str) -> dict[str, Any]:
    if not isinstance(data.get("providers", {}), dict):
        raise InstallError(
            f'{where}: "providers" must be an object; nothing was installed',
            f'fix "providers" in {where}',
        )
    return data


def merged(text: str | None, entry: dict[str, Any], where: str = REL) -> str:
    """``text`` (the person's models.json, or None) with the reef provider set to ``entry``."""
    data = _with_providers(parse_json_object(text, where), where)
    providers = dict(data.get("providers") or {})
    providers[PROVIDER] = entry
    data["providers"] = providers
    return dump_json(data)


def unmerged(text: str) -> str | None:
    """``text`` without the reef provider (the person's other providers stay)."""
    data = person_json_object(text)
    if data is None or not isinstance(data.get("providers"), dict):
        return text
    providers = {k: v for k, v in data["providers"].items() if k != PROVIDER}
    if providers:
        data["providers"] = providers
    else:
        data.pop("providers")
    return dump_json(data)


def check(target: Path) -> None:
    """Parse ``target/models.json`` now, so a corrupt file fails before anything is written."""
    path = target / REL
    _with_providers(read_json_object(path, REL), str(path))


def installed_models(target: Path) -> list[str]:
    """Model ids the installed reef provider lists (empty if none or unreadable)."""
    try:
        data = json.loads((target / REL).read_text(encoding="utf-8"))
        models = data["providers"][PROVIDER]["models"]
        return [str(m["id"]) for m in models if isinstance(m, dict) and m.get("id")]
    except (OSError, ValueError, KeyError, TypeError):
        return []

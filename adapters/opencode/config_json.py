"""The ``reef`` provider and default ``model`` in opencode's config: put in, take out.

opencode 1.18 reads ``opencode.json`` then ``opencode.jsonc`` from its config dir (the
later wins key by key). Reef edits the file the person already has (``opencode.jsonc``
first, as the one that wins), else creates ``opencode.json``. It adds
``provider.reef`` (OpenAI-compatible, at ``reef serve``) and sets ``model`` to
``reef/<id>``; both are spliced into the text (see ``jsonc``) so comments and the
person's own providers keep their bytes. The token and the session are ``{env:NAME}``
references opencode substitutes when it loads the file: no secret is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters._files import InstallError, dump_json
from adapters.base import Routing
from adapters.opencode import jsonc
from reef_cli.core.launcher import RELEASE_HEADER

PROVIDER = "reef"
NPM = "@ai-sdk/openai-compatible"  # bundled in the opencode binary: nothing is downloaded
SCHEMA = "https://opencode.ai/config.json"
NAMES = ("opencode.jsonc", "opencode.json")
DEFAULT_NAME = "opencode.json"


def config_rel(target: Path, previous: str | None = None) -> str:
    """Which file to merge into: the one the last install used (while it exists), the
    person's ``opencode.jsonc`` or ``opencode.json``, else a new ``opencode.json``."""
    if previous in NAMES and (target / previous).is_file():
        return str(previous)
    for name in NAMES:
        if (target / name).exists():
            return name
    return DEFAULT_NAME


def provider_entry(routing: Routing, models: list[str], release: int | None) -> dict[str, Any]:
    """The provider object: chat completions at ``reef serve`` with Reef's headers.

    ``release`` goes out as ``x-reef-release-id`` so records are credited to what is
    installed (a trial's candidate, release 0, sends none)."""
    headers = {
        "x-reef-scenario": routing.scenario,
        "x-reef-session": "{env:" + routing.session_env + "}",
    }
    if release is not None and release > 0:
        headers[RELEASE_HEADER] = str(int(release))
    return {
        "npm": NPM,
        "name": f"Reef ({routing.scenario})",
        "options": {
            "baseURL": routing.base_url.rstrip("/") + "/v1",
            "apiKey": "{env:" + routing.token_env + "}",
            "headers": headers,
        },
        "models": {model: {"name": f"{model} (Reef)"} for model in models},
    }


def check(text: str | None, where: str) -> dict[str, Any]:
    """The config as data; ``InstallError`` (nothing written) when Reef cannot merge."""
    if text is None or not text.strip():
        return {}
    fix = f"fix or move {where} aside, then install again"
    try:
        data = jsonc.loads(text)
        if not isinstance(data, dict):
            raise InstallError(f"{where} must hold a JSON object; nothing was installed", fix)
        jsonc.find(text, ())
    except jsonc.JsoncError as exc:
        raise InstallError(
            f"{where} is not valid JSON/JSONC ({exc}); nothing was installed", fix
        ) from exc
    if not isinstance(data.get("provider", {}), dict):
        raise InstallError(f'{where}: "provider" must be an object; nothing was installed', fix)
    if "model" in data and not isinstance(data["model"], str):
        raise InstallError(f'{where}: "model" must be a string; nothing was installed', fix)
    return data


def merged(text: str | None, entry: dict[str, Any], model: str, where: str) -> str:
    """``text`` (None: no file yet) with ``provider.reef = entry`` and ``model`` set."""
    check(text, where)
    if text is None or not text.strip():
        return dump_json({"$schema": SCHEMA, "provider": {PROVIDER: entry}, "model": model})
    root = jsonc.find(text, ())
    assert root is not None
    providers = jsonc.find(text, ("provider",))
    if providers is None:
        text = jsonc.insert_first(text, root, "provider", {PROVIDER: entry})
    else:
        ours = providers.get(PROVIDER)
        if ours is None:
            text = jsonc.insert_first(text, providers, PROVIDER, entry)
        else:
            text = jsonc.replace_value(text, providers, ours, entry)
    root = jsonc.find(text, ())
    assert root is not None
    current = root.get("model")
    if current is None:
        text = jsonc.insert_first(text, root, "model", model)
    else:
        text = jsonc.replace_value(text, root, current, model)
    return text


def unmerged(text: str, original: str | None) -> str | None:
    """``text`` without Reef's parts: ``provider.reef`` goes, ``model`` gets the
    ``original`` file's value back (or goes) while it still names a Reef model. None when
    Reef created the file and nothing of the person's is left in it. A file the person
    broke since is left as it is."""
    try:
        if not isinstance(jsonc.loads(text), dict):
            return text
        before = jsonc.loads(original) if original and original.strip() else {}
        providers = jsonc.find(text, ("provider",))
        if providers is not None and providers.get(PROVIDER) is not None:
            text = jsonc.remove(text, providers, providers.get(PROVIDER))  # type: ignore[arg-type]
            providers = jsonc.find(text, ("provider",))
            root = jsonc.find(text, ())
            provider = root.get("provider") if root else None
            if providers and not providers.members and "provider" not in before and root:
                text = jsonc.remove(text, root, provider)  # type: ignore[arg-type]
        text = _model_back(text, original)
        left = jsonc.loads(text)
    except jsonc.JsoncError:
        return text
    if original is None and isinstance(left, dict) and set(left) <= {"$schema"}:
        return None
    return text


def _model_back(text: str, original: str | None) -> str:
    root = jsonc.find(text, ())
    current = root.get("model") if root else None
    if root is None or current is None:
        return text
    if not (isinstance(current.value, str) and current.value.startswith(f"{PROVIDER}/")):
        return text  # the person picked another model since
    first = jsonc.find(original, ()) if original and original.strip() else None
    theirs = first.get("model") if first else None
    if theirs is None:
        return jsonc.remove(text, root, current)
    assert original is not None
    return jsonc.replace_raw(text, current, original[theirs.value_start : theirs.value_end])


def installed_models(target: Path, rel: str | None) -> list[str]:
    """Model ids the installed ``reef`` provider lists (empty when none or unreadable)."""
    for name in [rel] if rel else list(NAMES):
        try:
            data = jsonc.loads((target / name).read_text(encoding="utf-8"))
            models = data["provider"][PROVIDER]["models"]
            if isinstance(models, dict) and models:
                return [str(m) for m in models]
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return []

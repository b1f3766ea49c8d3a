"""`reef doctor`: what this machine has for Reef, each with the command that fixes it."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from reef_cli.core import agents, embedded, paths, tools

APT = "sudo apt-get install -y"


@dataclass
class Row:
    name: str
    status: str  # ok | warn | fail  (fail: Reef's core cannot work)
    detail: str
    fix: str = ""

    def to_json(self) -> dict[str, str]:
        return asdict(self)


def _version(argv: list[str]) -> str | None:
    """First line a ``--version`` call prints, or None when the binary is missing/broken."""
    binary = tools.find(argv[0])
    if binary is None:
        return None
    try:
        done = subprocess.run([binary, *argv[1:]], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (done.stdout or done.stderr).strip().splitlines()
    return text[0].strip() if done.returncode == 0 and text else None


def _binary(name: str, argv: list[str], fix: str, required: bool = False) -> Row:
    found = _version(argv)
    if found:
        return Row(name, "ok", found)
    return Row(name, "fail" if required else "warn", "not found", fix)


def _node() -> Row:
    found = _version(["node", "--version"])
    if not found:
        return Row(
            "node",
            "warn",
            "not found (the pi adapter needs Node.js >= 20)",
            "./install.sh (installs Node.js 22 from the npm registry)",
        )
    match = re.match(r"v(\d+)\.(\d+)", found)
    major, minor = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
    if (major, minor) >= (22, 19):
        return Row("node", "ok", f"{found} (pi 1.6 and 0.73)")
    if major >= 20:
        return Row(
            "node",
            "warn",
            f"{found} (pi 0.73 only; pi 1.6 needs >= 22.19)",
            "./install.sh (installs Node.js 22)",
        )
    return Row("node", "warn", f"{found} is too old for pi", "./install.sh (installs Node.js 22)")


def _agents() -> list[Row]:
    """One row per executable of every registered agent (``reef_cli.core.agents``)."""
    rows = []
    for agent in agents.registered():
        fix = agent.install or agent.package
        for binary in (agent.binary, *agent.tools):
            rows.append(_binary(binary, [binary, "--version"], fix))
    return rows


def _state_dir() -> Row:
    root = paths.state_dir()
    try:
        paths.ensure_state_dir()
        probe = root / ".doctor-probe"
        probe.write_text("ok")
        probe.unlink()
    except Exception as exc:
        return Row("state dir", "fail", f"{root}: {exc}", "export REEF_HOME=/a/writable/dir")
    return Row("state dir", "ok", f"{root} (writable)")


def _records_store() -> Row:
    """Where records go, and whether that database answers (a team's PostgreSQL)."""
    from reef_cli.core.errors import ReefError
    from reef_cli.core.store import database_url, open_store

    try:
        url = database_url()
        if not url:
            return Row("records store", "ok", "SQLite in the state dir (the default)")
        store = open_store(url)
    except ReefError as exc:
        return Row("records store", "fail", exc.message, exc.hint or "")
    try:
        return Row("records store", "ok", f"{store.kind} at {store.url} (reachable, migrated)")
    finally:
        store.close()


def _embedded_model() -> Row:
    """The embedded model in use: installed, verified (from the verification cache: no
    hashing here), and the runtime that runs it."""
    try:
        found = embedded.resolve()
    except Exception as exc:  # a bad embedded_model setting: say it, keep the table
        return Row("embedded model", "warn", str(exc), "reef model use NAME (reef model list)")
    spec = found.spec
    if found.path is None:
        return Row(
            "embedded model",
            "warn",
            f"{found.wanted} not installed",
            f"reef model install {found.wanted} (or ./install.sh)",
        )
    size = found.path.stat().st_size // (1024 * 1024)
    what = f"{spec.name} ({spec.display}, {size} MB)"
    if not embedded.runtime_available():
        return Row(
            "embedded model",
            "warn",
            f"{what} but no llama-cpp-python",
            "./install.sh (builds llama-cpp-python)",
        )
    if not embedded.is_verified(spec, found.path):
        verified = "installed, sha256 not checked yet (checked on first use)"
    else:
        verified = "installed, sha256 verified"
    why = found.note or (
        f"chosen by {found.reason}" if found.source == "setting" else f"default: {found.reason}"
    )
    status = "warn" if found.note and found.source == "setting" else "ok"
    fix = f"reef model install {found.wanted}" if found.note else ""
    return Row("embedded model", status, f"{what}: {verified}; {why}", fix)


def _shadowing() -> list[Row]:
    """Reef ships top-level packages with common names; another install may hide ours."""
    ours = Path(__file__).resolve().parents[2]
    rows = []
    for package in ("adapters", "recipes", "sandbox", "reefd"):
        spec = importlib.util.find_spec(package)
        location = Path(spec.origin).resolve() if spec and spec.origin else None
        if location is not None and location.is_relative_to(ours):
            rows.append(Row(f"package {package}", "ok", f"Reef's own ({location.parent})"))
        else:
            where = location.parent if location else "missing"
            rows.append(
                Row(
                    f"package {package}",
                    "fail",
                    f"shadowed by {where}",
                    f"pip uninstall the package that provides {package!r}, or reinstall Reef in "
                    "its own venv: ./install.sh",
                )
            )
    return rows


def _ollama() -> Row:
    from reef_cli.core.ollama_local import host, local_models

    models = local_models()
    if models is None:
        return Row(
            "ollama",
            "warn",
            f"no server at {host()} (optional: Reef uses the embedded model)",
            "install and start Ollama to use local models",
        )
    if not models:
        return Row("ollama", "warn", f"{host()} serves no models", "ollama pull llama3.2")
    offer = ", ".join(f"ollama/{m}" for m in models[:5])
    return Row("ollama", "ok", f"{host()}: {offer} (reef config set model ollama/<name>)")


def _model(timeout: float = 3.0) -> Row:
    """The configured model (``reef config set model`` / ``api_base``) is reachable: one
    ``GET …/models`` with a short timeout; no call that costs tokens."""
    import httpx

    from reef_cli.core.llm import EMBEDDED, default_model, endpoint_for, missing_key

    model, api_base = default_model()
    if model == EMBEDDED:
        return Row("model", "ok", "none configured: recipes use the embedded model")
    missing = missing_key(model, api_base)
    if missing is not None:  # before any probe: "cannot reach" would hide the real cause
        return Row("model", "warn", f"no {missing} set for model {model}", f"export {missing}=…")
    endpoint = endpoint_for(model, api_base)
    base = (endpoint.url or "").rstrip("/")
    probe = base + ("/models" if base.endswith("/v1") else "/v1/models")
    headers: dict[str, str] = {}
    key = os.environ.get(endpoint.key_env) if endpoint.key_env else None
    if endpoint.key_env and not key:
        return Row(
            "model",
            "warn",
            f"{model} at {base}: ${endpoint.key_env} is not set",
            f"export {endpoint.key_env}=<your API key>",
        )
    if key and endpoint.dialect == "anthropic":
        headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    elif key:
        headers = {"authorization": f"Bearer {key}"}
    change = "`reef config set api_base URL` (or `reef config unset model` for the embedded one)"
    try:
        response = httpx.get(probe, headers=headers, timeout=timeout)
    except httpx.TimeoutException:
        return Row(
            "model",
            "fail",
            f"{model}: {probe} did not answer within {timeout:g}s",
            f"start the model server, or {change}",
        )
    except httpx.HTTPError as exc:
        return Row(
            "model",
            "fail",
            f"{model}: cannot reach {probe} ({type(exc).__name__})",
            f"start the model server, or {change}",
        )
    status = response.status_code
    if status in (401, 403):
        return Row(
            "model",
            "warn",
            f"{model}: {probe} answered {status} (the API key was refused)",
            f"check ${endpoint.key_env}" if endpoint.key_env else "check the server's API key",
        )
    if status >= 500:
        return Row(
            "model", "warn", f"{model}: {probe} answered {status}", f"check the server, or {change}"
        )
    return Row(
        "model", "ok", f"{model}: {base} reachable (GET {probe.removeprefix(base)}: {status})"
    )


def _binaries_without_sandbox() -> list[Row]:
    """bwrap and pasta found on PATH, for a caller that has no sandbox check to give."""
    return [
        _binary("bwrap", ["bwrap", "--version"], f"{APT} bubblewrap"),
        _binary("pasta", ["pasta", "--version"], f"{APT} passt"),
    ]


def _isolation(sandbox_rows: list[Row] | None) -> list[Row]:
    """The bwrap/pasta rows and the sandbox's own checks. Given the sandbox's rows (the
    CLI passes them: core does not import the sandbox), its ``bwrap`` and ``pasta`` rows
    *are* the bwrap and pasta checks — one finder, one answer; the rest are ``sandbox: …``."""
    if sandbox_rows is None:
        return _binaries_without_sandbox()
    by_name = {row.name: row for row in sandbox_rows}
    for own in _binaries_without_sandbox() if {"bwrap", "pasta"} - set(by_name) else []:
        by_name.setdefault(own.name, own)  # the sandbox check itself failed: say what PATH has
    rows = [by_name["bwrap"], by_name["pasta"]]
    bwrap_ok = rows[0].status == "ok"
    for row in sandbox_rows:
        if row.name in ("bwrap", "pasta"):
            continue
        if row.name == "mode" and row.detail.startswith("bwrap") and not bwrap_ok:
            # "mode: bwrap" next to "bwrap: not found" said two things: say the one that holds
            row = Row(
                "mode",
                "warn",
                "bwrap is the sandbox mode, but bwrap is not found: trials cannot run",
                rows[0].fix,
            )
        rows.append(Row(f"sandbox: {row.name}", row.status, row.detail, row.fix))
    return rows


def run_checks(
    sandbox_rows: list[Row] | None = None, install_rows: list[Row] | None = None
) -> list[Row]:
    """Every check, one row each. ``sandbox_rows`` and ``install_rows`` come from the
    caller (`reef doctor` asks the sandbox and the adapters; core imports neither)."""
    python = f"{sys.version.split()[0]} ({sys.executable})"
    rows = [
        Row(
            "python", "ok" if sys.version_info >= (3, 11) else "fail", python, "use Python >= 3.11"
        ),
        _binary("git", ["git", "--version"], f"{APT} git", required=True),
        _binary("git-lfs", ["git", "lfs", "version"], f"{APT} git-lfs"),
        *_isolation(sandbox_rows),
        _node(),
        *_agents(),
        _embedded_model(),
        _model(),
        _ollama(),
        _state_dir(),
        _records_store(),
        *(install_rows or []),
        *_shadowing(),
    ]
    if sandbox_rows is None and os.environ.get("REEF_SANDBOX") == "none":
        rows.append(
            Row("REEF_SANDBOX", "warn", "none: trials run without isolation", "unset REEF_SANDBOX")
        )
    return rows

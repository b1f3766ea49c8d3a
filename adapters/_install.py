"""Install a scenario's release into an agent: resolve, render, record."""

from __future__ import annotations

from pathlib import Path

from adapters import get
from adapters.base import ReleaseToInstall, Routing
from reef_cli.core import installs, scenarios


def release_to_install(scenario_name: str, spec: str = "served") -> ReleaseToInstall:
    scenario = scenarios.get(scenario_name)
    chain = scenario.chain()
    release = scenario.resolve(spec)
    latest = chain.latest()
    return ReleaseToInstall(
        scenario=scenario_name,
        number=release.number,
        files=chain.files(release),
        content_hash=release.meta.content_hash,
        latest=latest.number if latest else None,
    )


def install_release(
    adapter_name: str,
    scenario_name: str,
    routing: Routing,
    spec: str = "served",
    target: Path | None = None,
) -> tuple[ReleaseToInstall, Path]:
    adapter = get(adapter_name)
    release = release_to_install(scenario_name, spec)
    where = target or adapter.default_target()
    adapter.install(release, where, routing)
    installs.record(scenario_name, adapter.name, where, release.number, release.content_hash)
    return release, where


def uninstall(adapter_name: str, target: Path | None = None) -> Path:
    adapter = get(adapter_name)
    where = target or adapter.default_target()
    adapter.uninstall(where)
    installs.forget(adapter.name, where)
    return where


def install_remote(
    adapter_name: str,
    scenario_name: str,
    server: str,
    token: str,
    spec: str = "served",
    target: Path | None = None,
) -> tuple[ReleaseToInstall, Path]:
    """Install a release fetched from a remote `reef serve` (no local chain needed)."""
    import httpx

    from reef_cli.core.errors import ServeError

    try:
        response = httpx.get(
            f"{server.rstrip('/')}/reef/harness",
            params={"scenario": scenario_name, "release": spec},
            headers={"authorization": f"Bearer {token}"},
            timeout=30.0,
        )
    except httpx.HTTPError as exc:
        raise ServeError(
            f"cannot reach {server}: {type(exc).__name__}",
            "check the URL and that `reef serve` runs there",
        ) from exc
    if response.status_code != 200:
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = response.text[:200]
        raise ServeError(
            f"{server} answered {response.status_code}: {message}",
            "check REEF_TOKEN and the scenario name",
        )
    data = response.json()
    meta = data["release"]
    release = ReleaseToInstall(
        scenario=scenario_name,
        number=int(meta["number"]),
        files=dict(data["files"]),
        content_hash=str(meta["content_hash"]),
        latest=int(meta["number"]),
    )
    adapter = get(adapter_name)
    where = target or adapter.default_target()
    adapter.install(release, where, Routing(base_url=server.rstrip("/"), scenario=scenario_name))
    installs.record(scenario_name, adapter.name, where, release.number, release.content_hash)
    return release, where

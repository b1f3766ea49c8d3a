"""Install a scenario's release into an agent: resolve, render, record.

This is the one install path (`reef harness install`, `reef-pi install N`, the in-agent
`/versions N install`, quickstart): a *pending* release — extension code the gate held
for review — is refused here unless the caller passes ``allow_pending``. The default
spec, ``served``, never resolves to a pending release.
"""

from __future__ import annotations

from pathlib import Path

from adapters import get, names
from adapters.base import ReleaseToInstall, Routing
from reef_cli.core import installs, scenarios
from reef_cli.core.errors import GateBlocked


def refuse_pending(
    scenario_name: str, number: int, status: str, adapter: str | None = None
) -> None:
    """A pending release holds extension code nobody reviewed: do not install it."""
    if status != "pending":
        return
    raise GateBlocked(
        f"r{number} of {scenario_name} is pending review: it holds extension code the gate "
        "has not passed",
        f"review it (`reef harness show {number} -s {scenario_name}`), then "
        f"`reef harness promote {number} -s {scenario_name}` and install the new release; or "
        f"install it unreviewed: `reef harness install -a {adapter or '|'.join(names())} "
        f"-s {scenario_name} "
        f"-r {number} --allow-pending`",
    )


def release_to_install(
    scenario_name: str,
    spec: str = "served",
    *,
    allow_pending: bool = False,
    adapter: str | None = None,
) -> ReleaseToInstall:
    scenario = scenarios.get(scenario_name)
    chain = scenario.chain()
    release = scenario.resolve(spec)
    if not allow_pending:
        refuse_pending(scenario_name, release.number, release.meta.status, adapter)
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
    *,
    allow_pending: bool = False,
) -> tuple[ReleaseToInstall, Path]:
    adapter = get(adapter_name)
    release = release_to_install(
        scenario_name, spec, allow_pending=allow_pending, adapter=adapter.name
    )
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
    *,
    allow_pending: bool = False,
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
    try:
        data = response.json()
        meta = data["release"]
        number = int(meta["number"])
        status = str(meta.get("status", "live"))
        files = {str(k): str(v) for k, v in dict(data["files"]).items()}
        content_hash = str(meta["content_hash"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ServeError(
            f"{server} answered with something that is not a Reef release",
            "check that the URL points at `reef serve`",
        ) from exc
    if not allow_pending:
        refuse_pending(scenario_name, number, status, get(adapter_name).name)
    release = ReleaseToInstall(
        scenario=scenario_name,
        number=number,
        files=files,
        content_hash=content_hash,
        latest=number,
    )
    adapter = get(adapter_name)
    where = target or adapter.default_target()
    adapter.install(release, where, Routing(base_url=server.rstrip("/"), scenario=scenario_name))
    installs.record(scenario_name, adapter.name, where, release.number, release.content_hash)
    return release, where

"""Publishing: the one path by which a tree becomes a release — gate first, then the chain.

Used by `reef harness publish|rollback|promote`, the Reef API and recipes alike, so every
release, however it was made, passed the same static gate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from reef_cli.core import scenarios
from reef_cli.core.config import Settings, load_settings
from reef_cli.core.gate import Check, Verdict, static_checks
from reef_cli.core.releases import Release
from reef_cli.core.tree import Limits, read_folder


def limits_from(settings: Settings) -> Limits:
    return Limits(
        max_file_bytes=settings.max_file_kib * 1024, max_tree_bytes=settings.max_tree_kib * 1024
    )


def publish_files(
    scenario_name: str,
    files: Mapping[str, str],
    *,
    reason: str,
    source: str = "publish",
    recipe: str | None = None,
    reviewed: bool = False,
    points_to: int | None = None,
    extra: Mapping[str, Any] | None = None,
    extra_checks: list[Check] | None = None,
    progress: Callable[[str], None] | None = None,
    settings: Settings | None = None,
) -> tuple[Release, Verdict]:
    """Gate ``files`` and publish them as the scenario's next release.

    A blocked verdict raises ``GateBlocked`` and writes nothing. Extensions make the
    release *pending* unless ``reviewed`` (a person vouched for the code).
    """
    settings = settings or load_settings()
    scenario = scenarios.get(scenario_name)
    chain = scenario.chain()
    chain.head()  # fail on a corrupt chain before doing any work
    verdict = static_checks(files, limits_from(settings), progress)
    verdict.checks.extend(extra_checks or [])
    if reviewed:
        for check in verdict.checks:
            if check.name == "extension-review" and check.status == "pending":
                check.status = "passed"
                check.detail = "reviewed by the publisher"
    verdict.raise_if_blocked()
    release = chain.publish(
        files,
        source=source,
        reason=reason,
        recipe=recipe,
        status="pending" if verdict.pending else "live",
        points_to=points_to,
        gate=verdict.to_json(),
        extra=extra,
        retries=settings.publish_retries,
    )
    return release, verdict


def publish_dir(
    scenario_name: str,
    folder: Path,
    *,
    reason: str,
    reviewed: bool = False,
    progress: Callable[[str], None] | None = None,
) -> tuple[Release, Verdict]:
    settings = load_settings()
    scenarios.get(scenario_name)  # unknown scenario: say so before reading the folder
    files = read_folder(folder, limits_from(settings))
    return publish_files(
        scenario_name,
        files,
        reason=reason,
        reviewed=reviewed,
        progress=progress,
        settings=settings,
    )


def republish(
    scenario_name: str, spec: str, *, source: str, reason: str
) -> tuple[Release, Verdict]:
    """Rollback or promote: publish an old release's content as a new release.

    Promote is the person's review of pending extension code, so it publishes live.
    """
    scenario = scenarios.get(scenario_name)
    chain = scenario.chain()
    target = scenario.resolve(spec)
    files = chain.files(target)
    default_reason = f"{source} to r{target.number}"
    return publish_files(
        scenario_name,
        files,
        reason=reason or default_reason,
        source=source,
        reviewed=source == "promote" or target.meta.status == "live",
        points_to=target.number,
    )

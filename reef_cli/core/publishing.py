"""Publishing: the one path by which a tree becomes a release — gate first, then the chain.

Used by `reef harness publish|rollback|promote`, the Reef API and recipes alike, so every
release, however it was made, passed the same static gate. A rollback, however it is asked
for, goes through ``rollback`` here, so its default target is the chain's one rule
(``Chain.rollback_target``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from reef_cli.core import scenarios
from reef_cli.core.checks import Check, Verdict, static_checks
from reef_cli.core.config import Settings, load_settings
from reef_cli.core.errors import GateBlocked
from reef_cli.core.releases import Release
from reef_cli.core.tree import MANIFEST, Limits, read_folder


def limits_from(settings: Settings) -> Limits:
    return Limits(
        max_file_bytes=settings.max_file_kib * 1024, max_tree_bytes=settings.max_tree_kib * 1024
    )


def is_empty(files: Mapping[str, str]) -> bool:
    """No rules, skills, commands or extensions: at most the manifest."""
    return all(path == MANIFEST for path in files)


def refuse_empty(scenario_name: str, files: Mapping[str, str], latest: Release | None) -> None:
    """An empty tree would replace the live harness with nothing: refuse it, except as the
    first release of a new chain (`reef-pi` starts one that way)."""
    if latest is None or not is_empty(files):
        return
    raise GateBlocked(
        f"the tree is empty (no rules, skills, commands or extensions): publishing it would "
        f"replace {latest.tag} of {scenario_name} with nothing",
        "add a file to the tree, or pass --allow-empty to publish an empty release on purpose",
    )


def gate_files(
    files: Mapping[str, str],
    settings: Settings | None = None,
    progress: Callable[[str], None] | None = None,
) -> Verdict:
    """The static gate with the configured limits: what every publish runs. A recipe's
    engine runs it once, before any trial, and hands the verdict to ``publish_files``."""
    return static_checks(files, limits_from(settings or load_settings()), progress)


def publish_files(
    scenario_name: str | scenarios.Scenario,
    files: Mapping[str, str],
    *,
    reason: str,
    gated: Verdict | None = None,
    source: str = "publish",
    recipe: str | None = None,
    reviewed: bool = False,
    allow_empty: bool = False,
    points_to: int | None = None,
    extra: Mapping[str, Any] | None = None,
    extra_checks: list[Check] | None = None,
    progress: Callable[[str], None] | None = None,
    settings: Settings | None = None,
    hold: str | None = None,
) -> tuple[Release, Verdict]:
    """Gate ``files`` and publish them as the scenario's next release.

    A blocked verdict raises ``GateBlocked`` and writes nothing. ``gated`` is a verdict
    ``gate_files`` already gave for exactly ``files`` (the engine's), so it is not re-run.
    Extensions make the release *pending* unless ``reviewed`` (a person vouched for the
    code). An empty tree (no rules, skills, commands or extensions) is refused unless it
    is the chain's first release or ``allow_empty`` (a person chose to clear the harness).
    ``hold`` (e.g. ``"review"``) publishes a passing release as *pending* — a proposal
    the served release does not become until `reef harness promote N` — and says why in
    its metadata (``held_for``).
    """
    settings = settings or load_settings()
    scenario = (
        scenario_name
        if isinstance(scenario_name, scenarios.Scenario)
        else scenarios.get(scenario_name)  # a name: looked up once, here
    )
    chain = scenario.chain()
    chain.head()  # fail on a corrupt chain before doing any work
    if not allow_empty:
        refuse_empty(scenario.name, files, chain.latest())
    # ``gated``: the caller already ran gate_files on exactly these files.
    verdict = gated if gated is not None else gate_files(files, settings, progress)
    verdict = Verdict([*verdict.checks, *(extra_checks or [])], verdict.tree)
    if reviewed:
        for check in verdict.checks:
            if check.name == "extension-review" and check.status == "pending":
                check.status = "passed"
                check.detail = "reviewed by the publisher"
    verdict.raise_if_blocked()
    if hold is not None:
        extra = {**(extra or {}), "held_for": hold}
    release = chain.publish(
        files,
        source=source,
        reason=reason,
        recipe=recipe,
        status="pending" if verdict.pending or hold is not None else "live",
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
    allow_empty: bool = False,
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
        allow_empty=allow_empty,
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
        allow_empty=True,  # rolling back to an empty release is the person's explicit choice
        points_to=target.number,
    )


def rollback(
    scenario_name: str, spec: str | None = None, *, reason: str = ""
) -> tuple[Release, Verdict]:
    """Publish release ``spec``'s content as a new release (numbers only grow).

    Without ``spec``: ``Chain.rollback_target`` — the release served before the current
    one (the newest live release older than the served one, with other content). `reef
    harness rollback [RELEASE]` and ``POST /reef/scenarios/{s}/rollback`` both come here.
    """
    if spec is None:
        spec = str(scenarios.get(scenario_name).chain().rollback_target().number)
    return republish(scenario_name, spec, source="rollback", reason=reason)

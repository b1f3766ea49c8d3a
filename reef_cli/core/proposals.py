"""Proposals: pending releases a person has not promoted or rejected yet.

A release is *pending* when the gate held it (extension code nobody reviewed) or when a
recipe ran with ``publish: review`` (``held_for: "review"`` in its metadata). It stays a
proposal until it is resolved: promoted (a later release has ``points_to`` it with source
``promote``) or rejected (``scenarios/<S>/rejected.json``). Rejecting writes nothing to
the chain — numbers only grow, and a rejection is a person's note, not a release.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from reef_cli.core import scenarios
from reef_cli.core.errors import ReleaseNotFound
from reef_cli.core.fsutil import atomic_write_text, read_json_object
from reef_cli.core.records import now_iso
from reef_cli.core.releases import Release

REJECTED_FILE = "rejected.json"


@dataclass
class Proposal:
    release: Release
    held_for: str  # review (a recipe's proposal) | extension-review (unreviewed code)

    def to_json(self) -> dict[str, Any]:
        return {**self.release.to_json(), "held_for": self.held_for}


def rejected(scenario: scenarios.Scenario) -> dict[int, dict[str, Any]]:
    """``{release: {release, reason, rejected_at, content_hash}}`` from rejected.json."""
    items = read_json_object(scenario.path / REJECTED_FILE).get("rejected")
    out: dict[int, dict[str, Any]] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("release"), int):
            out[item["release"]] = item
    return out


def _promoted(releases: list[Release]) -> dict[int, int]:
    """``{pending release: the release that promoted it}``."""
    return {
        r.meta.points_to: r.number
        for r in releases
        if r.meta.source == "promote" and r.meta.points_to is not None
    }


def _held_for(release: Release) -> str:
    extra = release.meta.model_dump()
    return str(extra.get("held_for") or "extension-review")


def states(scenario: scenarios.Scenario, releases: list[Release] | None = None) -> dict[int, str]:
    """``{release: "pending" | "promoted" | "rejected"}`` for every release published as
    pending: its ``status`` stays ``pending`` in the chain (releases never change), so
    whoever lists releases shows this instead."""
    releases = scenario.chain().releases() if releases is None else releases
    promoted = _promoted(releases)
    refused = rejected(scenario)
    return {
        r.number: "promoted"
        if r.number in promoted
        else "rejected"
        if r.number in refused
        else "pending"
        for r in releases
        if r.meta.status == "pending"
    }


def shown_status(release: Release, found: dict[int, str]) -> str:
    """What a listing shows as ``release``'s status: its proposal state (``states``) if
    it was one, else its chain status."""
    return found.get(release.number, release.meta.status)


def release_json(release: Release, found: dict[int, str]) -> dict[str, Any]:
    """``release.to_json()`` plus ``proposal`` (its state) when it was published pending."""
    data = release.to_json()
    if release.number in found:
        data["proposal"] = found[release.number]
    return data


def pending(scenario: scenarios.Scenario) -> list[Proposal]:
    """Unresolved pending releases, newest first."""
    releases = scenario.chain().releases()
    found = states(scenario, releases)
    return [
        Proposal(r, _held_for(r)) for r in reversed(releases) if found.get(r.number) == "pending"
    ]


def reject(scenario: scenarios.Scenario, spec: str, reason: str = "") -> dict[str, Any]:
    """Record that a person rejected proposal ``spec``; refuse anything that is not one."""
    chain = scenario.chain()
    release = scenario.resolve(spec)
    releases = chain.releases()
    name = scenario.name
    if release.meta.status != "pending":
        raise ReleaseNotFound(
            f"{release.tag} of {name} is not a proposal: it is {release.meta.status}",
            f"list proposals with `reef harness proposals -s {name}`",
        )
    promoted = _promoted(releases).get(release.number)
    if promoted is not None:
        raise ReleaseNotFound(
            f"{release.tag} of {name} was already promoted (as r{promoted})",
            f"roll back with `reef harness rollback N -s {name}` instead",
        )
    refused = rejected(scenario)
    if release.number in refused:
        raise ReleaseNotFound(
            f"{release.tag} of {name} was already rejected "
            f"({str(refused[release.number].get('rejected_at', ''))[:19]})",
            f"list open proposals with `reef harness proposals -s {name}`",
        )
    entry = {
        "release": release.number,
        "reason": reason,
        "rejected_at": now_iso(),
        "content_hash": release.meta.content_hash,
    }
    items = [*refused.values(), entry]
    body = {"rejected": sorted(items, key=lambda i: int(i["release"]))}
    atomic_write_text(
        scenario.path / REJECTED_FILE, json.dumps(body, indent=1, sort_keys=True) + "\n", 0o600
    )
    return entry

"""Chain remotes: a team shares a scenario's release chain through any git URL.

A scenario's remote is plain git config in its bare repository (``remote.reef.url``), so
``git`` itself can read it. This module is the per-scenario side: add, show, pull, push
and remove a scenario's remote (``reef scenario remote``, ``pull``, ``push``) and list
the scenarios that have one. A pull moves a local ref only when that adds releases (the
local head is an ancestor of the remote's), through the Chain's compare-and-swap; a pull
never rewrites local history: diverged chains are a ``ChainDiverged`` and nothing
changes. How fetch, push with a lease, git-lfs and a publish's :class:`Link` work is
``core/chain_remote.py``, which the release chain itself uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reef_cli.core.chain_remote import (
    FETCH_SPECS,
    REFS,
    REMOTE,
    TRACKING,
    _diverged,
    _fetch_weights,
    _git,
    _missing_tags,
    _push,
    fetch,
    is_ancestor,
    link,
    normalize,
    number,
    probe,
    redact,
    relation,
    rev,
    tracking,
    url_of,
)
from reef_cli.core.errors import ChainConflict, ChainDiverged, RemoteError, RemoteNotSet

if TYPE_CHECKING:
    from reef_cli.core.releases import Chain
    from reef_cli.core.scenarios import Scenario

# re-exported: the git side's public names, as callers knew them before the split
__all__ = [
    "REMOTE",
    "RefState",
    "add",
    "fetch",
    "is_ancestor",
    "link",
    "normalize",
    "probe",
    "pull",
    "push",
    "redact",
    "remove",
    "rev",
    "show",
    "url_of",
    "with_remote",
]


# ---------------------------------------------------------------- per scenario


@dataclass(frozen=True)
class RefState:
    """Where one chain (``chain`` or ``weights``) stands against its remote."""

    label: str
    prefix: str
    local: int | None
    remote: int | None
    state: str  # empty | same | behind | ahead | fast-forwarded | pushed
    before: int | None = None  # the local number before a fast-forward

    def to_json(self) -> dict[str, Any]:
        return {
            "local": self.local,
            "remote": self.remote,
            "state": self.state,
            **({"before": self.before} if self.state == "fast-forwarded" else {}),
        }

    def line(self, scenario: str) -> str:
        def tag(n: int | None) -> str:
            return f"{self.prefix}{n}" if n else "empty"

        return {
            "empty": f"{self.label}: empty here and on the remote",
            "same": f"{self.label}: up to date at {tag(self.local)}",
            "fast-forwarded": f"{self.label}: fast-forwarded {tag(self.before)} -> "
            f"{tag(self.local)}",
            "pushed": f"{self.label}: pushed {tag(self.local)}",
            "ahead": f"{self.label}: local {tag(self.local)} is ahead of the remote's "
            f"{tag(self.remote)}: run `reef scenario push {scenario}`",
            "behind": f"{self.label}: the remote's {tag(self.remote)} is ahead of local "
            f"{tag(self.local)}: run `reef scenario pull {scenario}`",
        }[self.state]


def _scenario(name: str) -> Scenario:
    from reef_cli.core import scenarios

    return scenarios.get(name)


def _required_url(scenario: Scenario) -> str:
    url = url_of(scenario.chain_dir)
    if url is None:
        raise RemoteNotSet(
            f"scenario {scenario.name!r} has no chain remote",
            f"add one with `reef scenario remote add {scenario.name} URL`",
        )
    return url


def _chain(scenario: Scenario, ref: str, prefix: str) -> Chain:
    from reef_cli.core.releases import Chain

    return Chain(scenario.chain_dir, ref=ref, tag_prefix=prefix)


def _states(scenario: Scenario) -> list[tuple[str, str, str, str | None, str | None, str]]:
    git_dir = scenario.chain_dir
    out = []
    for label, ref, prefix in REFS:
        local, remote = rev(git_dir, ref), rev(git_dir, tracking(ref))
        out.append((label, ref, prefix, local, remote, relation(git_dir, local, remote)))
    return out


def show(name: str) -> dict[str, Any]:
    """The remote and where each chain stands against it as last fetched (no network)."""
    scenario = _scenario(name)
    url = _required_url(scenario)
    git_dir = scenario.chain_dir
    refs = {
        label: RefState(label, prefix, number(git_dir, lo), number(git_dir, re_), state)
        for label, _, prefix, lo, re_, state in _states(scenario)
    }
    return {"scenario": name, "remote": REMOTE, "url": redact(url), "refs": refs}


def pull(name: str) -> dict[str, RefState]:
    """Fetch, then fast-forward each local chain the remote is ahead of (weights: after
    their LFS objects arrived). Diverged anywhere: ``ChainDiverged`` before anything moves.
    """
    scenario = _scenario(name)
    url = _required_url(scenario)
    git_dir = scenario.chain_dir
    fetch(git_dir, url)
    states = _states(scenario)
    for _, ref, _, local, remote, state in states:
        if state == "diverged":
            raise _diverged(git_dir, ref, local, remote, url)
    out: dict[str, RefState] = {}
    for label, ref, prefix, local, remote, state in states:
        before = number(git_dir, local)
        if state == "behind" and remote is not None:
            if label == "weights":
                _fetch_weights(git_dir, url)
            moved = _chain(scenario, ref, prefix).fast_forward(remote)
            after = number(git_dir, remote)
            shown = "fast-forwarded" if moved else "same"
            out[label] = RefState(label, prefix, after, after, shown, before)
        else:
            out[label] = RefState(label, prefix, before, number(git_dir, remote), state)
    return out


def push(name: str) -> dict[str, RefState]:
    """Push each local chain the remote lacks releases of, leased on the value last
    fetched, in one atomic push with the tags. Rejected: ``ChainConflict`` (pull first)."""
    scenario = _scenario(name)
    url = _required_url(scenario)
    git_dir = scenario.chain_dir
    updates: list[tuple[str, str, str | None]] = []
    tags: list[str] = []
    out: dict[str, RefState] = {}
    for label, ref, prefix, local, remote, state in _states(scenario):
        if state == "diverged":
            raise _diverged(git_dir, ref, local, remote, url)
        if local is not None and state in ("same", "ahead"):
            tags += _missing_tags(git_dir, local, prefix)
        if state == "ahead" and local is not None:
            updates.append((local, ref, remote))
        shown = "pushed" if state == "ahead" else state
        out[label] = RefState(label, prefix, number(git_dir, local), number(git_dir, remote), shown)
    if (updates or tags) and not _push(git_dir, url, updates, tags):
        raise ChainConflict(
            f"the chain remote {redact(url)} moved since the last fetch (someone published): "
            "nothing was pushed",
            f"run `reef scenario pull {name}` first, then push again",
        )
    for label, done in list(out.items()):
        if done.state == "pushed":
            out[label] = RefState(done.label, done.prefix, done.local, done.local, "pushed")
    return out


def add(name: str, url: str) -> dict[str, Any]:
    """Set ``url`` as the scenario's remote (created locally if missing), after checking
    that git can read it; then pull. Replaces an earlier remote (its tracking refs go)."""
    from reef_cli.core import scenarios
    from reef_cli.core.errors import ScenarioNotFound

    url = normalize(url)
    try:
        scenario = scenarios.get(name)
        created = False
    except ScenarioNotFound:
        scenario, created = None, True
    own = scenario.chain_dir.resolve() if scenario else None
    if own is not None and "://" not in url and Path(url) == own:
        raise RemoteError(
            "a scenario's chain cannot be its own remote", "pass another repository's URL"
        )
    probe(url)
    if scenario is None:
        scenario = scenarios.get_or_create(name)
    git_dir = scenario.chain_dir
    old = url_of(git_dir)
    if old is not None:
        _forget(git_dir)
    _git(git_dir, "config", f"remote.{REMOTE}.url", url)
    _git(git_dir, "config", f"remote.{REMOTE}.tagOpt", "--no-tags")
    for i, spec in enumerate(FETCH_SPECS):
        _git(git_dir, "config", "--add" if i else "--replace-all", f"remote.{REMOTE}.fetch", spec)
    try:
        refs = pull(name)
    except ChainDiverged as exc:
        raise ChainDiverged(f"remote added, but {exc.message}", exc.hint) from None
    return {
        "scenario": name,
        "remote": REMOTE,
        "url": redact(url),
        "created": created,
        "replaced": redact(old) if old and old != url else None,
        "refs": refs,
    }


def _forget(git_dir: Path) -> None:
    _git(git_dir, "config", "--remove-section", f"remote.{REMOTE}")
    refs = _git(git_dir, "for-each-ref", "--format=%(refname)", TRACKING).stdout.split()
    if refs:
        _git(git_dir, "update-ref", "--stdin", stdin="".join(f"delete {r}\n" for r in refs))


def remove(name: str) -> str:
    """Forget the scenario's remote (the local chain is untouched); the URL it had."""
    scenario = _scenario(name)
    url = _required_url(scenario)
    _forget(scenario.chain_dir)
    return redact(url)


def with_remote() -> list[Scenario]:
    """The scenarios that have a chain remote."""
    from reef_cli.core import scenarios

    return [s for s in scenarios.list_all() if url_of(s.chain_dir) is not None]

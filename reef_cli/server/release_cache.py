"""Which release each scenario serves, cached so the hot path never touches git.

A cached value stays valid while the chain ref is unchanged: every lookup stats the ref
file (``refs/reef/chain``, and ``packed-refs`` where git packed it), two ``stat`` calls
of a few microseconds. A publish, promote or rollback moves the ref with ``git
update-ref``, which writes a new file and renames it into place — a new inode and mtime —
so the next request after a publish by any process (``reef serve`` itself, the CLI, a
recipe) reloads the value before it answers. As a safety net for odd filesystems a value
is also re-read in the background once it is ``ttl`` seconds old (at least 1 s).

A read never creates anything: an unknown scenario is ``ScenarioNotFound``. Whether a
proxied request may create one is the proxy's rule (``proxy.Proxy._release``).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from reef_cli.core import scenarios
from reef_cli.core.scenarios import ChainKey


@dataclass(frozen=True)
class Releases:
    """What the proxy needs to know about a scenario's chain."""

    served: int | None  # the newest live release (None: nothing live yet)
    latest: int | None  # the newest release; releases are numbered 1..latest

    def credit(self, claimed: str | None) -> tuple[int | None, str | None]:
        """The release to credit a request to, and why a client's claim was ignored.

        ``claimed`` is the request's ``x-reef-release-id`` (the release the client has
        installed); it counts when it is an integer naming an existing release."""
        if claimed is None or not claimed.strip():
            return self.served, None
        text = claimed.strip()
        shown = "".join(c for c in text[:24] if c.isascii() and c.isprintable())
        if not (text.isascii() and text.isdigit()):
            return self.served, f"x-reef-release-id {shown!r} ignored: not a release number"
        number = int(text)
        if self.latest is None:
            return self.served, (
                f"x-reef-release-id {number} ignored: this scenario has no releases yet"
            )
        if not 1 <= number <= self.latest:
            return self.served, (
                f"x-reef-release-id {number} ignored: this scenario has r1..r{self.latest}"
            )
        return number, None


def load(scenario: str) -> Releases:
    """The scenario's served and latest release numbers; ``ScenarioNotFound`` if unknown."""
    releases = scenarios.get(scenario).chain().releases()
    served = next((r.number for r in reversed(releases) if r.meta.status == "live"), None)
    return Releases(served, releases[-1].number if releases else None)


@dataclass
class _Entry:
    value: Releases
    key: ChainKey
    ref_files: tuple[str, str]  # what ``key`` is read from (scenarios.chain_ref_files)
    loaded_at: float


class ReleaseCache:
    def __init__(self, ttl: float = 2.0) -> None:
        self.ttl = max(ttl, 1.0)
        self._values: dict[str, _Entry] = {}
        self._loading: dict[str, asyncio.Future[Releases]] = {}

    def invalidate(self, scenario: str | None = None) -> None:
        if scenario is None:
            self._values.clear()
        else:
            self._values.pop(scenario, None)

    async def get(self, scenario: str) -> int | None:
        """The served release number of ``scenario``."""
        return (await self.releases(scenario)).served

    async def releases(self, scenario: str) -> Releases:
        """``ScenarioNotFound`` for an unknown scenario."""
        hit = self._values.get(scenario)
        if hit is not None:
            if scenarios.chain_key(hit.ref_files) == hit.key:
                if time.monotonic() - hit.loaded_at >= self.ttl and scenario not in self._loading:
                    self._start_load(scenario).add_done_callback(_quiet)
                return hit.value
            self._values.pop(scenario, None)  # the chain moved: reload before answering
        future = self._loading.get(scenario) or self._start_load(scenario)
        return await asyncio.shield(future)

    def _start_load(self, scenario: str) -> asyncio.Future[Releases]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Releases] = loop.create_future()
        self._loading[scenario] = future

        def read() -> _Entry:
            # the key before reading: a publish meanwhile shows as a change
            ref_files = scenarios.chain_ref_files(scenarios.chain_dir_of(scenario))
            key = scenarios.chain_key(ref_files)
            return _Entry(load(scenario), key, ref_files, time.monotonic())

        async def run() -> None:
            try:
                entry = await asyncio.to_thread(read)
                self._values[scenario] = entry
                future.set_result(entry.value)
            except BaseException as exc:
                future.set_exception(exc)
            finally:
                self._loading.pop(scenario, None)

        task = loop.create_task(run())
        task.add_done_callback(_quiet)
        return future


def _quiet(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()  # mark retrieved: errors reach the awaiting request instead

"""Keep a replica's chains up with their remotes: `reef serve` pulls in the background.

Every ``interval`` seconds each scenario with a chain remote is pulled
(``core.remotes.pull``): a fast-forward moves the local chain ref, and the release cache
re-reads a scenario whose ref file changed, so a publish on any machine reaches what this
replica serves within about one interval. A pull never rewrites local history, so a
replica whose chain diverged keeps serving what it has and says so in the log. Errors
are logged once per change (not every interval), with URLs' passwords hidden; nothing
here can stop the server.
"""

from __future__ import annotations

import logging

from reef_cli.core.errors import ReefError
from reef_cli.server.periodic import Periodic

log = logging.getLogger("reef.serve")


class RemoteSync(Periodic):
    """A daemon thread pulling every scenario that has a chain remote."""

    name = "reef-remote-sync"

    def __init__(self, interval: float = 2.0) -> None:
        super().__init__(interval)
        self._problems: dict[str, str] = {}  # scenario -> the error last logged

    def run_once(self) -> dict[str, str]:
        """Pull each scenario with a remote once; ``{scenario: what happened}``."""
        from reef_cli.core import remotes

        try:
            found = [s.name for s in remotes.with_remote()]
        except Exception as exc:  # a broken state dir must not end the thread
            self._note("*", f"cannot list scenarios ({type(exc).__name__})")
            return {}
        self._note("*", None)
        out: dict[str, str] = {}
        for name in found:
            if self._stop.is_set():
                break
            try:
                refs = remotes.pull(name)
            except ReefError as exc:
                out[name] = remotes.redact(exc.one_line())
            except Exception as exc:  # a bug: its class only, never its text
                out[name] = f"internal error ({type(exc).__name__})"
            else:
                moved = [s.line(name) for s in refs.values() if s.state == "fast-forwarded"]
                out[name] = "; ".join(moved) if moved else "up to date"
                for line in moved:
                    log.info("chain remote: %s", line)
                self._note(name, None)
                continue
            self._note(name, out[name])
        for gone in set(self._problems) - {*found, "*"}:
            self._problems.pop(gone)
        return out

    def _note(self, name: str, problem: str | None) -> None:
        """Log a problem when it first appears or changes, and once when it clears."""
        before = self._problems.get(name)
        if problem == before:
            return
        if problem is None:
            self._problems.pop(name, None)
            log.info("chain remote: %s pulls again", name)
        else:
            self._problems[name] = problem
            log.warning("chain remote: pulling %s failed: %s", name, problem)

"""``sandbox.run`` and ``sandbox.mode``, re-exported by the package: kept in their own
module so ``_check`` (which probes by running the real thing) imports them without
importing the package that imports it."""

from __future__ import annotations

import contextlib
import os
import pwd
from collections.abc import Mapping, Sequence
from pathlib import Path

from reef_cli.core.errors import SandboxError

from ._binds import Protected, is_system
from ._mode import resolve_mode
from ._policy import Limits, Policy, Result
from ._proc import OnOutput


def mode(unsandboxed: bool = False) -> str:
    """The mode a run would use now: ``bwrap`` or ``none``."""
    return resolve_mode(unsandboxed)


def run(
    argv: Sequence[str],
    workdir: str | Path,
    *,
    allow: Sequence[tuple[str, int]] = (),
    ro_binds: Sequence[str | Path] = (),
    env: Mapping[str, str] | None = None,
    limits: Limits | None = None,
    home: str | Path | None = None,
    policy: Policy | None = None,
    on_output: OnOutput | None = None,
    unsandboxed: bool = False,
) -> Result:
    """Run ``argv`` in ``workdir`` under ``policy`` (or one built from the keywords).

    ``on_output(stream, text)`` receives output chunks as they arrive ("stdout"/"stderr").
    Raises ``SandboxUnavailable`` when isolation is missing and not waived,
    ``SandboxError`` for a bad request or a failed setup.
    """
    if policy is None:
        policy = Policy.make(allow=allow, ro_binds=ro_binds, env=env, limits=limits, home=home)
    elif allow or ro_binds or env or limits or home:
        raise SandboxError("pass either a policy or policy keywords, not both", "merge them")
    if not argv:
        raise SandboxError("no command to run", "pass the command after --")
    wd = _check_workdir(Path(workdir))
    chosen = resolve_mode(unsandboxed)
    if chosen == "none":
        from ._none import run_none

        return run_none(list(argv), wd, policy, on_output)
    from ._bwrap import run_bwrap

    return run_bwrap(list(argv), wd, policy, on_output)


def _check_workdir(path: Path) -> Path:
    """The work dir must be a real directory that holds no system dir and no home dir."""
    if not path.is_dir():
        raise SandboxError(f"work dir {path} is not a directory", "create it first")
    wd = path.resolve()
    homes = {Path(os.path.expanduser("~")).resolve()}
    with contextlib.suppress(KeyError):
        homes.add(Path(pwd.getpwuid(os.getuid()).pw_dir).resolve())
    if str(wd) == "/" or is_system(wd) or any(h == wd or wd in h.parents for h in homes):
        raise SandboxError(
            f"work dir {wd} is, or contains, a system or home directory",
            "use a dedicated directory (e.g. a fresh copy of the project)",
        )
    Protected.now().check_bind(wd, "the work dir")
    return wd

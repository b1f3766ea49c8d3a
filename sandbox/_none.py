"""The explicit ``none`` mode: no isolation, only what a plain process can be given - a
throwaway copy of the work dir, an empty environment, HOME in a temp dir, rlimits and a
wall clock - and a loud warning on every run."""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from . import _limits
from ._binds import SANDBOX_PATH
from ._policy import Policy, Result
from ._proc import OnOutput, Spawned

log = logging.getLogger("reef.sandbox")

WARNING = (
    "reef: WARNING: running WITHOUT a sandbox (REEF_SANDBOX=none / --unsandboxed): the "
    "command can read your files and secrets, reach the network and outlive this run; only "
    "a copy of the work dir, an empty environment, a temp HOME, rlimits and a wall clock apply."
)


def run_none(
    argv: Sequence[str], workdir: Path, policy: Policy, on_output: OnOutput | None
) -> Result:
    print(WARNING, file=sys.stderr, flush=True)
    log.warning(WARNING)
    base = Path(tempfile.mkdtemp(prefix="reef-unsandboxed-"))
    work = base / "work"
    shutil.copytree(workdir, work, symlinks=True)
    home = base / "home"
    tmp = base / "tmp"
    home.mkdir()
    tmp.mkdir()
    env = {"PATH": SANDBOX_PATH, "HOME": str(home), "LANG": "C.UTF-8", "TMPDIR": str(tmp)}
    env.update(policy.env)
    _limits.node_options(policy.limits, env)
    uid = os.getuid()
    running = _limits.count_processes(uid) if uid != 0 else None
    pairs = _limits.rlimit_pairs(policy.limits, running)
    try:
        sp = Spawned(
            argv, env=env, cwd=str(work), preexec=_limits.preexec(pairs), on_output=on_output
        )
        rc, timed_out = sp.wait(policy.limits.wall_s)
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return sp.result(rc, timed_out, "none", work)

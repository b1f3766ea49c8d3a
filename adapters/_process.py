"""Running an agent as a plain child process: the default ``Launch`` (no isolation)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

from adapters.contract import (
    Exit,
    Gateway,
    HeadlessJob,
    HeadlessRun,
    Launch,
    ReleaseToInstall,
    Routing,
    Transcript,
)

AGENT_DIR = ".reef-agent"  # where run_headless installs the tree, inside the work dir
#: A headless run's environment before the agent's own variables: nothing inherited.
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


def run_group(
    argv: list[str],
    workdir: Path,
    env: dict[str, str],
    timeout: float,
    stdin: str | None = None,
) -> Exit:
    """Run ``argv`` in its own process group; past ``timeout`` kill the group (rc 124)."""
    proc = subprocess.Popen(
        argv,
        cwd=workdir,
        env=env,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
        return Exit(proc.returncode, out or "", err or "")
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        name = Path(argv[0]).name
        err = (err or "") + f"\nreef: {name} did not finish within {timeout:g}s and was stopped\n"
        return Exit(124, out or "", err, timed_out=True)


def local_launch(argv: list[str], workdir: Path, env: dict[str, str], timeout: float) -> Exit:
    """The default ``Launch``: the agent runs on the host, unisolated, with its own HOME
    inside the work dir so nothing lands in the person's."""
    home = workdir / ".home"
    home.mkdir(exist_ok=True)
    return run_group(argv, workdir, {"HOME": str(home), **env}, timeout)


def headless_job(
    files: dict[str, str], prompt: str, workdir: Path, gateway: Gateway, *, isolated: bool
) -> HeadlessJob:
    """What ``run_headless`` installs and where: ``files`` as release 0 of the gateway's
    scenario, into ``workdir/.reef-agent``, routed through the gateway."""
    from reef_cli.core.tree import content_hash

    target = Path(workdir).absolute() / AGENT_DIR
    routing = Routing(base_url=gateway.base_url, scenario=gateway.scenario)
    release = ReleaseToInstall(gateway.scenario, 0, dict(files), content_hash(files))
    return HeadlessJob(release, target, routing, gateway, prompt, isolated)


def new_session_id() -> str:
    """A Reef session id for one run (sent as ``x-reef-session``)."""
    return str(uuid.uuid4())


def launch_run(
    run: HeadlessRun, workdir: Path, timeout: float, launch: Launch | None = None
) -> Transcript:
    """``run`` through ``launch`` (default: ``local_launch``), timed, with its session."""
    started = time.time()
    done = (launch or local_launch)(run.argv, workdir, {**BASE_ENV, **run.env}, timeout)
    seconds = round(time.time() - started, 2)
    return Transcript(
        done.returncode,
        done.stdout,
        done.stderr,
        run.session_of(started),
        timed_out=done.timed_out,
        session_id=run.session_id,
        isolation=done.isolation,
        seconds=seconds,
    )

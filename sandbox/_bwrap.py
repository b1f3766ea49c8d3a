"""The bwrap runner: read-only system, one writable work dir, a private HOME, /tmp, /proc
and /dev, every namespace unshared, an empty environment plus a whitelist.

As root, bwrap sets the sandbox up with full privileges (so it can bind any path, such as
an interpreter under a 0700 /root) and the command then drops to an unprivileged host uid
with ``setpriv`` (no caps, no_new_privs): a sandbox mapped to host uid 0 could read
root-only files and ignore RLIMIT_NPROC. (Joining a prepared user namespace with
``--userns`` would save that exec, but bwrap then sets up as the unprivileged uid and
cannot reach such paths.) As a normal user, bwrap makes its own user namespace.

bwrap always holds the sandbox's PID 1 on ``--block-fd`` until Reef has set the rlimits on
it with prlimit(2) (and, with an allowed port, until pasta listens); it reports that pid on
``--info-fd``.

Each run has its own locked temp dir (``_runs``: the HOME, the pinned netns, what was
lent) and is registered, before bwrap starts, with the caller's watchdog (``_watchdog``),
which kills and cleans up the run if the caller dies; the next run's sweep is the fallback.
"""

from __future__ import annotations

import json
import os
import select
from collections.abc import Sequence
from pathlib import Path
from subprocess import Popen

from reef_cli.core.errors import SandboxError, SandboxUnavailable

from . import _limits, _pasta, _runs, _watchdog
from ._binds import (
    SANDBOX_PATH,
    Protected,
    ancestors_args,
    find_program,
    program_binds,
    top_level_args,
)
from ._mode import find_setpriv, require_bwrap, require_pasta, sandbox_ids
from ._owner import Lease
from ._policy import Policy, Result
from ._proc import OnOutput, Spawned

HOME = "/home/sandbox"
INNER_ID = "1000"
BWRAP_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
START_TIMEOUT_S = 10.0
RUN_TAG = "REEF_SANDBOX_RUN"


def sandbox_env(policy: Policy) -> dict[str, str]:
    env = {"PATH": SANDBOX_PATH, "HOME": HOME, "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
    env["USER"] = env["LOGNAME"] = "sandbox"
    env.update(policy.env)
    _limits.node_options(policy.limits, env)
    return env


def tun_usable() -> bool:
    return os.access("/dev/net/tun", os.R_OK | os.W_OK)


def build_args(
    bwrap: str,
    argv: Sequence[str],
    workdir: Path,
    home: Path,
    policy: Policy,
    env: dict[str, str],
    *,
    root_ids: tuple[int, int] | None,
    own_netns: bool,
    info_fd: int,
    block_fd: int,
    token: str = "",
    guard: Protected | None = None,
) -> list[str]:
    """The full bwrap command line. ``root_ids``: the host uid/gid a root caller's command
    drops to (None: not root); ``own_netns``: False when pasta wraps bwrap and owns the
    network namespace; ``token``: the run's tag on bwrap's command line (``_runs``)."""
    guard = guard or Protected.now()
    args = [bwrap, *top_level_args()]
    # One capped tmpfs (RLIMIT_AS does not count tmpfs pages): /var/tmp is a link to it.
    tmp_bytes = str(policy.limits.tmp_cap_mb * _limits.MB)
    args += ["--perms", "1777", "--size", tmp_bytes, "--tmpfs", "/tmp"]
    args += ["--perms", "0755", "--dir", "/var", "--symlink", "/tmp", "/var/tmp"]
    args += ["--proc", "/proc", "--dev", "/dev"]
    found, on_path = find_program(argv[0], env.get("PATH"))
    if found and not on_path:
        argv = [found, *argv[1:]]  # found on the caller's PATH only: run it by path
    binds: list[Path] = []
    for b in policy.ro_binds:
        guard.check_bind(b, "the read-only bind")
    for b in [*program_binds(argv[0], env.get("PATH"), guard), *policy.ro_binds]:
        if b not in binds:
            binds.append(b)
    args += ancestors_args([*map(str, binds), HOME, str(workdir)], set())
    for b in binds:
        args += ["--ro-bind", str(b), str(b)]
    args += ["--bind", str(home), HOME, "--bind", str(workdir), str(workdir)]
    args += ["--chdir", str(workdir)]
    if root_ids is not None:
        args += ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
        args += ["--unshare-net"] if own_netns else []
        args += ["--hostname", "reef-sandbox"]
    else:
        args += ["--unshare-all", "--unshare-user", "--uid", INNER_ID, "--gid", INNER_ID]
        args += ["--disable-userns", "--cap-drop", "ALL"]
        if not own_netns:
            args += ["--share-net"]  # pasta wraps bwrap and owns the namespace
    args += ["--die-with-parent", "--new-session", "--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    if token:
        # Tags bwrap's command line (and so its held PID 1's) without reaching the command.
        args += ["--setenv", RUN_TAG, token, "--unsetenv", RUN_TAG]
    args += ["--info-fd", str(info_fd), "--block-fd", str(block_fd), "--"]
    if root_ids is not None:
        uid, gid = root_ids
        args += [find_setpriv() or "setpriv", f"--reuid={uid}", f"--regid={gid}"]
        args += ["--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
        args += ["--"]
    return [*args, *argv]


def _read_info(fd: int, timeout: float) -> dict[str, int] | None:
    """bwrap's info JSON (child pid …), or None when bwrap failed before writing it."""
    buf = b""
    while True:
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        buf += chunk
        try:
            info = json.loads(buf)
        except ValueError:
            continue
        return info if isinstance(info, dict) else None


def run_bwrap(
    argv: Sequence[str], workdir: Path, policy: Policy, on_output: OnOutput | None
) -> Result:
    bwrap = require_bwrap()
    pasta = require_pasta() if policy.allow else None
    root_ids = sandbox_ids() if os.geteuid() == 0 else None
    if root_ids is None and pasta and not tun_usable():
        raise SandboxUnavailable(
            "pasta cannot open /dev/net/tun as a normal user here, so no port can be allowed",
            "make /dev/net/tun read-write for users (mode 0666), or run Reef as root",
        )
    result = _Run(bwrap, pasta, argv, workdir, policy, root_ids).go(on_output)
    if _setup_flaked(result):  # the command never ran: one more try
        result = _Run(bwrap, pasta, argv, workdir, policy, root_ids).go(on_output)
    return result


# bwrap's own failure to bring up the new namespace's loopback, before it ran anything; seen
# now and then on a busy host (``bwrap: loopback: Failed RTM_NEWADDR: No child processes``)
_LOOPBACK_FLAKE = "bwrap: loopback: "


def _setup_flaked(result: Result) -> bool:
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    return (
        result.returncode == 1
        and not result.stdout
        and len(lines) == 1
        and lines[0].startswith(_LOOPBACK_FLAKE)
    )


class _Run:
    """One sandboxed run: its run dir, pipes, helper processes, all released by go().

    If the caller dies instead, its watchdog (or the next run's sweep) releases them."""

    def __init__(
        self,
        bwrap: str,
        pasta: str | None,
        argv: Sequence[str],
        workdir: Path,
        policy: Policy,
        root_ids: tuple[int, int] | None,
    ) -> None:
        self.bwrap, self.pasta, self.argv = bwrap, pasta, list(argv)
        self.workdir, self.policy, self.root_ids = workdir, policy, root_ids
        self.fds: set[int] = set()
        self.leases: list[Lease] = []
        self.lent = False
        self.sp: Spawned | None = None
        self.pasta_proc: Popen[bytes] | None = None
        self.netns: _pasta.NetnsFile | None = None
        self.run: _runs.RunDir | None = None
        self.watched = False

    def pipe(self) -> tuple[int, int]:
        r, w = os.pipe()
        self.fds |= {r, w}
        return r, w

    def close(self, fd: int) -> None:
        if fd in self.fds:
            self.fds.discard(fd)
            os.close(fd)

    def go(self, on_output: OnOutput | None) -> Result:
        try:
            return self._go(on_output)
        finally:
            self._release()

    def _go(self, on_output: OnOutput | None) -> Result:
        policy, ids = self.policy, self.root_ids
        guard = Protected.now()
        if policy.home is not None:
            guard.check_bind(policy.home, "the sandbox HOME")
        run = self.run = _runs.RunDir()
        _runs.sweep(skip=run.path)
        if policy.home is None:
            home = run.path / "home"
            home.mkdir(mode=0o700)
        else:
            home = policy.home
        if ids is not None:
            self.leases = [Lease.survey(self.workdir), Lease.survey(home)]
        # Recorded before anything is lent, so a dead caller's run can be undone.
        run.save(self.workdir, self.leases)
        if ids is not None:
            self.lent = True
            for lease in self.leases:
                lease.lend(*ids)
        info_r, info_w = self.pipe()
        block_r, block_w = self.pipe()
        # As root, pasta joins the sandbox's namespace while bwrap holds PID 1; as a normal
        # user, pasta makes the namespace and runs bwrap in it.
        args = build_args(
            self.bwrap,
            self.argv,
            self.workdir,
            home,
            policy,
            sandbox_env(policy),
            root_ids=ids,
            own_netns=self.pasta is None or ids is not None,
            info_fd=info_w,
            block_fd=block_r,
            token=run.token,
            guard=guard,
        )
        if self.pasta is not None and ids is None:
            args = [self.pasta, *_pasta.port_options(policy.ports), "--", *args]
        self.watched = _watchdog.register(run.path, block_w)
        sp = self.sp = Spawned(
            args, env=dict(BWRAP_ENV), pass_fds=[info_w, block_r], on_output=on_output
        )
        self.close(info_w)
        self.close(block_r)
        info = _read_info(info_r, START_TIMEOUT_S)
        if info is None or "child-pid" not in info:
            sp.kill()
            sp.wait(None)
            raise SandboxError(f"bwrap could not set up the sandbox: {_last_line(sp)}", _CHECK)
        child = int(info["child-pid"])
        if self.pasta is not None and ids is None:  # bwrap ran in pasta's PID namespace
            child = outer_pid(child, sp.proc.pid)
        _limits.apply_to(child, _limits.rlimit_pairs(policy.limits, self._nproc_base()))
        if self.pasta is not None and ids is not None:
            self.netns = _pasta.NetnsFile(f"/proc/{child}/ns/net", str(run.path / "netns"))
            self.pasta_proc = _pasta.start(self.pasta, policy.ports, self.netns.path)
            _pasta.wait_listening(self.pasta_proc, child, policy.ports, self.pasta)
        os.write(block_w, b"1")
        self.close(block_w)
        rc, timed_out = sp.wait(policy.limits.wall_s)
        return sp.result(rc, timed_out, "bwrap", self.workdir)

    def _nproc_base(self) -> int:
        """Processes that already count for RLIMIT_NPROC besides the command's own: as root,
        everything the shared sandbox uid runs on the host; as a user, the sandbox's PID 1
        (bwrap's fresh user namespace counts its processes apart)."""
        if self.root_ids is not None:
            return _limits.count_processes(self.root_ids[0])
        return 1

    def _release(self) -> None:
        sp = self.sp
        if sp is not None and sp.proc.poll() is None:
            sp.kill()
            sp.wait(None)
        if self.pasta_proc is not None:
            _pasta.stop(self.pasta_proc)
        if self.netns is not None:
            self.netns.close()
        for fd in list(self.fds):
            self.close(fd)
        if self.lent:
            for lease in self.leases:
                lease.give_back()
        if self.run is not None:
            self.run.close()
            if self.watched:
                _watchdog.unregister(self.run.path)


_CHECK = "run `reef sandbox check` to see what this machine supports"


def _last_line(sp: Spawned) -> str:
    lines = [ln for ln in sp.output("stderr").splitlines() if ln.strip()]
    return lines[-1] if lines else "no error output"


def outer_pid(inner: int, ancestor: int) -> int:
    """Our namespace's pid for the process a descendant of ``ancestor`` knows as ``inner``.

    As a normal user, pasta runs bwrap in a new PID namespace, so the ``child-pid`` bwrap
    reports is a pid in *that* namespace — the second field of the process's ``NSpid``
    (ours, pasta's, then bwrap's own); the limits must go to the real process, never to
    whatever has that number out here (a root kernel thread, say: EPERM)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        nspids = fields.get("NSpid", "").split()
        if len(nspids) > 1 and nspids[1] == str(inner) and _descends(int(nspids[0]), ancestor):
            return int(nspids[0])
    raise SandboxError(
        f"the sandbox's first process (pid {inner} inside pasta) is gone before its limits "
        "were set",
        _CHECK,
    )


def _descends(pid: int, ancestor: int) -> bool:
    for _ in range(64):  # a short chain: pasta -> bwrap -> child
        if pid == ancestor:
            return True
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return False
        parent = next((ln.split()[1] for ln in status.splitlines() if ln.startswith("PPid:")), "0")
        pid = int(parent)
        if pid <= 1:
            return False
    return False

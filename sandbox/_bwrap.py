"""The bwrap runner: read-only system, one writable work dir, a private HOME, /tmp, /proc
and /dev, every namespace unshared, an empty environment plus a whitelist.

As root, bwrap sets the sandbox up with full privileges (so it can bind any path) and the
command then drops to an unprivileged host uid with ``setpriv`` (no caps, no_new_privs):
a sandbox mapped to host uid 0 could read root-only files and ignore RLIMIT_NPROC.
As a normal user, bwrap uses a user namespace and ``--disable-userns``.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from reef_cli.core.errors import SandboxError, SandboxUnavailable

from . import _limits, _pasta
from ._binds import SANDBOX_PATH, ancestors_args, program_binds, top_level_args
from ._mode import find_setpriv, require_bwrap, require_pasta, sandbox_ids
from ._owner import Lease
from ._policy import Policy, Result
from ._proc import OnOutput, Spawned

HOME = "/home/sandbox"
INNER_ID = "1000"
BWRAP_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


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
    as_root: bool,
    ids: tuple[int, int],
    net_fds: tuple[int, int] | None,
    info_fd: int,
) -> list[str]:
    """The full bwrap command line (``net_fds``: info/block fds when pasta joins later)."""
    args = [bwrap, *top_level_args()]
    args += ["--perms", "1777", "--tmpfs", "/tmp", "--perms", "1777", "--tmpfs", "/var/tmp"]
    args += ["--proc", "/proc", "--dev", "/dev"]
    binds: list[Path] = []
    for b in [*program_binds(argv[0], env.get("PATH")), *policy.ro_binds]:
        if b not in binds:
            binds.append(b)
    args += ancestors_args([*map(str, binds), HOME, str(workdir)], set())
    for b in binds:
        args += ["--ro-bind", str(b), str(b)]
    args += ["--bind", str(home), HOME, "--bind", str(workdir), str(workdir)]
    args += ["--chdir", str(workdir)]
    if as_root:
        args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
        args += ["--unshare-cgroup-try"]
    else:
        args += ["--unshare-all", "--unshare-user", "--uid", INNER_ID, "--gid", INNER_ID]
        args += ["--disable-userns", "--cap-drop", "ALL"]
        if policy.allow:
            args += ["--share-net"]  # pasta wraps bwrap and owns the namespace
    args += ["--hostname", "reef-sandbox"] if as_root else []
    args += ["--die-with-parent", "--new-session", "--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    args += ["--info-fd", str(info_fd)]
    if net_fds is not None:
        args += ["--block-fd", str(net_fds[0])]
    args.append("--")
    if as_root:
        uid, gid = ids
        setpriv = find_setpriv() or "setpriv"
        args += [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
        args += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
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
    as_root = os.geteuid() == 0
    pasta = require_pasta() if policy.allow else None
    if pasta and not as_root and not tun_usable():
        raise SandboxUnavailable(
            "pasta cannot open /dev/net/tun as a normal user here, so no port can be allowed",
            "make /dev/net/tun read-write for users (mode 0666), or run Reef as root",
        )
    ids = sandbox_ids() if as_root else (os.getuid(), os.getgid())
    env = sandbox_env(policy)
    own_home = policy.home is None
    home = Path(tempfile.mkdtemp(prefix="reef-home-")) if own_home else Path(policy.home or "")
    leases: list[Lease] = []
    info_r, info_w = os.pipe()
    block = os.pipe() if (pasta and as_root) else None
    open_fds = {info_r, info_w, *(block or ())}

    def close(fd: int) -> None:
        if fd in open_fds:
            open_fds.discard(fd)
            os.close(fd)

    sp: Spawned | None = None
    pasta_proc = None
    netns = None
    try:
        if as_root:
            leases = [Lease(workdir, *ids), Lease(home, *ids)]
        args = build_args(
            bwrap,
            argv,
            workdir,
            home,
            policy,
            env,
            as_root=as_root,
            ids=ids,
            net_fds=block,
            info_fd=info_w,
        )
        if pasta and not as_root:
            args = [pasta, *_pasta.port_options(policy.ports), "--", *args]
        pairs = _limits.rlimit_pairs(policy.limits, ids[0])
        # prlimit in front of bwrap (or pasta) keeps the spawn vfork-able; the child's
        # death with this thread then comes from bwrap's --die-with-parent.
        prefix = _limits.prlimit_prefix(pairs)
        fds = [info_w, *(block[:1] if block else ())]
        sp = Spawned(
            [*prefix, *args] if prefix else args,
            env=dict(BWRAP_ENV),
            preexec=None if prefix else _limits.preexec(pairs),
            pass_fds=fds,
            on_output=on_output,
        )
        close(info_w)
        if block is not None and pasta:
            close(block[0])
            info = _read_info(info_r, 10.0)
            if info is None or "child-pid" not in info:
                sp.kill()
                sp.wait(None)
                raise SandboxError(f"bwrap could not start: {_last_line(sp)}", _CHECK)
            pid = int(info["child-pid"])
            netns = _pasta.NetnsFile(pid)
            pasta_proc = _pasta.start(pasta, pid, policy.ports, netns.path)
            os.write(block[1], b"1")
        rc, timed_out = sp.wait(policy.limits.wall_s)
        if not timed_out and block is None and _read_info(info_r, 0.0) is None:
            raise SandboxError(f"bwrap could not set up the sandbox: {_last_line(sp)}", _CHECK)
        return sp.result(rc, timed_out, "bwrap", workdir)
    finally:
        if sp is not None and sp.proc.poll() is None:
            sp.kill()
            sp.wait(None)
        if pasta_proc is not None:
            _pasta.stop(pasta_proc)
        if netns is not None:
            netns.close()
        for fd in list(open_fds):
            close(fd)
        for lease in leases:
            lease.give_back()
        if own_home:
            shutil.rmtree(home, ignore_errors=True)


_CHECK = "run `reef sandbox check` to see what this machine supports"


def _last_line(sp: Spawned) -> str:
    lines = [ln for ln in sp.output("stderr").splitlines() if ln.strip()]
    return lines[-1] if lines else "no error output"

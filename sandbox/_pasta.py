"""Loopback-only networking: pasta forwards the allowed ports from the sandbox's own
network namespace to the host's loopback, and nothing else (no routes, no DHCP, no
inbound ports). Every port option is explicit: ``auto`` would expose every host listener.

As root, pasta drops capabilities before it opens ``--netns``, so it cannot open
``/proc/PID/ns/net`` of a privileged bwrap child: the namespace is bind-mounted on a file
first (what ``ip netns`` does) and pasta is handed the file.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence

from reef_cli.core.errors import SandboxError

from ._limits import die_with_parent

MS_BIND = 4096
MNT_DETACH = 2
START_TIMEOUT_S = 10.0

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def port_options(ports: Sequence[int]) -> list[str]:
    """Forward exactly ``ports`` from the namespace to the host's loopback. ``--no-udp`` and
    ``--no-icmp`` switch off handlers nothing here uses (no UDP port is forwarded and no tap
    is configured), which also trims pasta's start-up."""
    args = ["-q", "-f", "-t", "none", "-u", "none", "-U", "none", "--no-udp", "--no-icmp"]
    for port in ports:
        args += ["-T", str(port)]
    if not ports:
        args += ["-T", "none"]
    return [*args, "--no-map-gw", "--no-dhcp", "--no-dhcpv6", "--no-ndp", "--no-ra"]


class NetnsFile:
    """A bind mount of a network namespace on a private file; unmounted on close.

    ``path``: where to pin it (the run's dir, so a dead caller's sweep finds and unmounts
    it); default a fresh temp dir of its own."""

    def __init__(self, source: str, path: str | None = None) -> None:
        self.dir = None if path else tempfile.mkdtemp(prefix="reef-netns-")
        self.path = path or os.path.join(str(self.dir), "net")
        open(self.path, "w").close()
        if _libc.mount(source.encode(), self.path.encode(), None, MS_BIND, None) != 0:
            err = ctypes.get_errno()
            self.close(mounted=False)
            raise SandboxError(
                f"cannot pin the sandbox network namespace: {os.strerror(err)}",
                "run `reef sandbox check`",
            )

    def close(self, mounted: bool = True) -> None:
        if mounted:
            _libc.umount2(self.path.encode(), MNT_DETACH)
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        if self.dir is not None:
            with contextlib.suppress(OSError):
                os.rmdir(self.dir)


def listening(pid: int, port: int) -> bool:
    """Whether ``port`` is in LISTEN state in ``pid``'s network namespace."""
    suffix = f":{port:04X}"
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as fh:
                next(fh, None)
                for line in fh:
                    fields = line.split()
                    if len(fields) > 3 and fields[1].endswith(suffix) and fields[3] == "0A":
                        return True
        except OSError:
            continue
    return False


def start(pasta: str, ports: Sequence[int], netns_path: str) -> subprocess.Popen[bytes]:
    """Start pasta on the namespace pinned at ``netns_path``; ``wait_listening`` waits for
    it. It dies with the calling thread: ``setpriv --pdeathsig`` sets the parent-death
    signal and execs pasta, which lets Python vfork (a ``preexec_fn`` makes it fork and wait
    ~2 ms for the exec); the ``preexec_fn`` is the fallback without setpriv."""
    argv = [pasta, "--runas", "0", *port_options(ports), "--netns", netns_path, "--netns-only"]
    setpriv = shutil.which("setpriv")
    try:
        return subprocess.Popen(
            [setpriv, "--pdeathsig", "KILL", "--", *argv] if setpriv else argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=None if setpriv else die_with_parent,
        )
    except OSError as exc:
        raise SandboxError(
            f"pasta ({pasta}) is installed but cannot be started: {exc.strerror}",
            "check its permissions, or reinstall passt",
        ) from exc


def wait_listening(
    proc: subprocess.Popen[bytes], pid: int, ports: Sequence[int], pasta: str = "pasta"
) -> None:
    """Wait until pasta listens on every port inside ``pid``'s network namespace."""
    deadline = time.monotonic() + START_TIMEOUT_S
    waiting = list(ports)
    delay = 0.0002
    while waiting:
        waiting = [p for p in waiting if not listening(pid, p)]
        if not waiting:
            break
        if proc.poll() is not None or time.monotonic() > deadline:
            timed_out = proc.poll() is None
            if timed_out:
                proc.kill()
            err = (proc.stderr.read() if proc.stderr else b"").decode(errors="replace")
            stop(proc)
            raise failed(pasta, waiting, err, timed_out, proc.returncode)
        # pasta needs tens of ms to listen; a fine, capped back-off notices it within ~1 ms
        # (reading two small /proc tables costs far less than oversleeping).
        time.sleep(delay)
        delay = min(delay * 2, 0.001)


# pasta's own words for a host it cannot work on -> what to do about it
_KNOWN_CAUSES = (
    (
        ("external interface not usable", "no routable interface", "no interface"),
        "pasta needs a host network interface with a route (a default route), and this "
        "network namespace has only loopback: run Reef where the host has one, or allow no port",
    ),
    (
        ("/dev/net/tun", "tun"),
        "pasta cannot use /dev/net/tun: make it available (mknod /dev/net/tun c 10 200, "
        "mode 0666) or run Reef as root",
    ),
    (
        ("permission denied", "operation not permitted"),
        "pasta was refused a namespace operation: check AppArmor/SELinux and seccomp "
        "profiles for pasta, then run `reef sandbox check`",
    ),
)


def failed(
    pasta: str, ports: Sequence[int], stderr: str, timed_out: bool, returncode: int | None
) -> SandboxError:
    """Why pasta did not forward ``ports``: its own last line of stderr, and a fix for it.

    A missing pasta is reported before it is started (``_mode.require_pasta``); this is an
    installed pasta that failed, so the fix is never "install it"."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("Failed to send") or len(lines) == 1]
    if timed_out:
        why = f"it did not listen within {START_TIMEOUT_S:.0f} s" + (
            f" ({lines[-1]})" if lines else ""
        )
    else:
        why = lines[-1] if lines else f"it exited with status {returncode} and no message"
    low = why.lower()
    fix = next(
        (hint for words, hint in _KNOWN_CAUSES if any(w in low for w in words)),
        "see pasta's message above; `reef sandbox check` tries a forwarded port for real",
    )
    return SandboxError(
        f"pasta ({pasta}) is installed but failed to forward port(s) {list(ports)}: {why}",
        fix,
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL pasta and reap it on a daemon thread.

    Once SIGKILL is delivered pasta runs no more code, so nothing depends on waiting: its
    exit (freeing its large packet buffers) took tens of ms, now off the caller's path."""
    if proc.poll() is None:
        proc.kill()
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode is None:
        threading.Thread(target=proc.wait, name="reef-pasta-reaper", daemon=True).start()

"""What isolation this machine can give, and why not: used by `reef sandbox check` and
`reef doctor`. Every probe runs the real thing (a sandboxed command, a forwarded port)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from dataclasses import asdict, dataclass

from reef_cli.core.errors import ReefError


@dataclass(frozen=True)
class CheckRow:
    name: str
    ok: bool
    detail: str
    fix: str = ""

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _version(path: str, flag: str = "--version") -> str:
    try:
        out = subprocess.run([path, flag], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unrunnable: {exc}"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else "?"


def _probe_run(allow_port: int | None = None) -> tuple[bool, str]:
    """Run a tiny command in the real sandbox; with a port, connect to it from inside."""
    import tempfile

    from ._policy import Limits
    from ._run import run

    with tempfile.TemporaryDirectory(prefix="reef-check-") as wd:
        os.chmod(wd, 0o755)
        if allow_port is None:
            argv = ["/bin/sh", "-c", "echo ok"]
        else:
            code = f"import socket; socket.create_connection(('127.0.0.1', {allow_port}), 5); print('ok')"  # noqa: E501
            argv = [sys.executable, "-c", code]
        try:
            res = run(
                argv,
                wd,
                allow=[("127.0.0.1", allow_port)] if allow_port else [],
                limits=Limits(wall_s=20),
            )
        except ReefError as exc:
            return False, exc.one_line()
    if res.returncode == 0 and res.stdout.strip() == "ok":
        return True, f"ran in {res.duration_s * 1000:.0f} ms"
    return False, (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]


def _listener() -> tuple[socket.socket, int]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def accept() -> None:
        try:
            conn, _ = srv.accept()
            conn.close()
        except OSError:
            pass

    threading.Thread(target=accept, daemon=True).start()
    return srv, srv.getsockname()[1]


def check() -> list[CheckRow]:
    """Probe each piece; rows explain what works here and what to install otherwise."""
    from ._bwrap import tun_usable
    from ._mode import INSTALL_HINT, find_bwrap, find_pasta, find_setpriv, resolve_mode

    rows: list[CheckRow] = []
    try:
        chosen = resolve_mode()
    except ReefError as exc:
        return [CheckRow("mode", False, exc.message, exc.hint or "")]
    linux = sys.platform.startswith("linux")
    rows.append(CheckRow("linux", linux, sys.platform, "" if linux else "run trials on Linux"))
    if chosen == "none":
        rows.append(
            CheckRow(
                "mode",
                False,
                "REEF_SANDBOX=none: runs are NOT isolated",
                "unset REEF_SANDBOX / REEF_PROPOSER_SANDBOX",
            )
        )
    else:
        rows.append(CheckRow("mode", True, "bwrap (isolated)"))
    root = os.geteuid() == 0
    bwrap = find_bwrap()
    rows.append(
        CheckRow(
            "bwrap",
            bool(bwrap),
            f"{bwrap}: {_version(bwrap)}" if bwrap else "not found",
            "" if bwrap else INSTALL_HINT,
        )
    )
    if root:
        sp = find_setpriv()
        rows.append(
            CheckRow(
                "setpriv",
                bool(sp),
                "root: the sandbox drops to an unprivileged uid" if sp else "missing",
                "" if sp else "apt-get install util-linux",
            )
        )
    pasta = find_pasta()
    rows.append(
        CheckRow(
            "pasta", bool(pasta), pasta or "not found", "" if pasta else "apt-get install passt"
        )
    )
    if not root and pasta:
        ok = tun_usable()
        rows.append(
            CheckRow(
                "/dev/net/tun",
                ok,
                "read-write" if ok else "not usable by this user",
                "" if ok else "chmod 0666 /dev/net/tun, or run as root",
            )
        )
    if bwrap and linux and chosen == "bwrap":
        ok, detail = _probe_run()
        rows.append(CheckRow("sandboxed run", ok, detail, "" if ok else INSTALL_HINT))
        if pasta and ok:
            srv, port = _listener()
            try:
                ok2, detail2 = _probe_run(port)
            finally:
                srv.close()
            rows.append(
                CheckRow(
                    "loopback port via pasta",
                    ok2,
                    detail2,
                    "" if ok2 else "pasta is installed; its own reason is in the detail",
                )
            )
    rows.append(
        CheckRow(
            "limits",
            True,
            "rlimits (cpu, address space, file size, open files, "
            "nproc for a non-root uid), a capped /tmp tmpfs, wall clock via session kill; "
            "no cgroups",
        )
    )
    return rows


def doctor_rows() -> list[tuple[str, bool, str, str]]:
    """``check()`` as plain tuples (name, ok, detail, fix) for `reef doctor`."""
    return [(f"sandbox: {r.name}", r.ok, r.detail, r.fix) for r in check()]

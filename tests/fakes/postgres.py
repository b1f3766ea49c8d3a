"""A throwaway PostgreSQL cluster for the tests: a real server, not a mock.

    cluster = PostgresCluster.start()       # initdb in a temp dir, a free loopback port
    url = cluster.create_database("t1")    # postgresql://reef@127.0.0.1:PORT/t1
    cluster.drop_database("t1")
    cluster.stop()

The server binaries come from the distribution (`./install.sh --dev` apt-installs
`postgresql`): `/usr/lib/postgresql/<newest>/bin`, else PATH. initdb and postgres refuse
to run as root, so under root they run as the `postgres` system user (which the Debian
package creates) on a temp dir chowned to it. Settings are for a throwaway cluster: trust
auth on loopback and the socket dir, fsync and synchronous commit off.

A test run that dies (SIGKILL, a crash) must not leave a server behind: a small watchdog
process holds a pipe from this process and, when the pipe closes, stops the server
(SIGQUIT: immediate shutdown) and deletes the temp dir. An atexit hook stops it on a
normal exit too.
"""

from __future__ import annotations

import atexit
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

SUPERUSER = "reef"
READY_TIMEOUT = 60.0  # seconds for the server to accept connections on a slow CI machine
SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",  # replica tests run several pooled servers on one cluster
    "shared_buffers": "128MB",
    "max_wal_size": "1GB",
    "log_min_messages": "warning",
    "timezone": "UTC",
}

# The watchdog: waits for EOF on stdin (its parent died or closed the pipe), then stops
# the postmaster whose pid it was given and removes the cluster's temp dir.
_WATCHDOG = r"""
import os, shutil, signal, sys, time
pid, root = int(sys.argv[1]), sys.argv[2]
signal.signal(signal.SIGINT, signal.SIG_IGN)
sys.stdin.buffer.read()
try:
    os.kill(pid, signal.SIGQUIT)
except ProcessLookupError:
    pass
for _ in range(200):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        break
    time.sleep(0.05)
else:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
shutil.rmtree(root, ignore_errors=True)
"""


class PostgresMissing(RuntimeError):
    """PostgreSQL's server binaries (or the `postgres` user, under root) are not here."""


def find_bindir() -> Path:
    """The newest `/usr/lib/postgresql/N/bin` with initdb, else the one on PATH."""
    versions = []
    for path in Path("/usr/lib/postgresql").glob("*/bin/initdb"):
        if path.parent.parent.name.isdigit():
            versions.append((int(path.parent.parent.name), path.parent))
    if versions:
        return max(versions)[1]
    found = shutil.which("initdb")
    if found and shutil.which("postgres"):
        return Path(found).resolve().parent
    raise PostgresMissing("PostgreSQL server binaries (initdb, postgres) not found")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PostgresCluster:
    """One initdb'd, running cluster in a temp dir; `url` is its `reef` database."""

    def __init__(self, root: Path, port: int, server: subprocess.Popen[bytes], bindir: Path):
        self.root = root
        self.port = port
        self.bindir = bindir
        self._server = server
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._stopped = False

    # --- start ---------------------------------------------------------------------------
    @classmethod
    def start(cls, attempts: int = 3, settings: dict[str, str] | None = None) -> PostgresCluster:
        """initdb, start on a free port (retried when another process took it), wait ready.
        ``settings`` override SETTINGS (the bench runs with fsync and synchronous commit on)."""
        bindir = find_bindir()
        run_as = _run_as()
        root = Path(tempfile.mkdtemp(prefix="reef-pg-", dir="/tmp" if run_as else None))
        try:
            data, sockets = root / "data", root / "sockets"
            sockets.mkdir()
            if run_as:
                for path in (root, sockets):
                    os.chown(path, run_as.pw_uid, run_as.pw_gid)
            _initdb(bindir, data, root, run_as)
            last = ""
            for _ in range(attempts):
                port = free_port()
                server = _spawn(bindir, data, sockets, port, root, run_as, settings or {})
                ok, last = _wait_ready(server, data, root / "server.log")
                if ok:
                    cluster = cls(root, port, server, bindir)
                    cluster._watch()
                    cluster.create_database(SUPERUSER)
                    return cluster
            raise PostgresMissing(f"PostgreSQL did not start: {last}")
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise

    def _watch(self) -> None:
        self._watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(self._server.pid), str(self.root)],
            stdin=subprocess.PIPE,
            start_new_session=True,  # a Ctrl-C to the test run must not kill it first
        )
        atexit.register(self.stop)

    # --- use -----------------------------------------------------------------------------
    def url_for(self, database: str) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    @property
    def url(self) -> str:
        """The cluster's own `reef` database (superuser `reef`, no password)."""
        return self.url_for(SUPERUSER)

    @property
    def socket_dir(self) -> Path:
        return self.root / "sockets"

    def _admin(self) -> Any:
        import psycopg

        return psycopg.connect(self.url_for("postgres"), autocommit=True)

    def create_database(self, name: str) -> str:
        """A new, empty database; returns its URL."""
        _check_name(name)
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        """Drops it, ending any connection a test left open (FORCE)."""
        _check_name(name)
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def log(self) -> str:
        """The server's log (for a failing test's message)."""
        path = self.root / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # --- stop ----------------------------------------------------------------------------
    def stop(self) -> None:
        """Fast shutdown, then the watchdog removes the temp dir. Safe to call twice."""
        if self._stopped:
            return
        self._stopped = True
        if self._server.poll() is None:
            self._server.send_signal(signal.SIGINT)  # fast shutdown: ends sessions, exits
            try:
                self._server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._server.kill()
                self._server.wait()
        if self._watchdog is not None:
            _close(self._watchdog.stdin)
            self._watchdog.wait(timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)


def _check_name(name: str) -> None:
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
        raise ValueError(f"database name {name!r}: use [a-z_][a-z0-9_]*")


def _close(stream: IO[bytes] | None) -> None:
    if stream is not None:
        stream.close()


def _run_as() -> pwd.struct_passwd | None:
    """Under root: the `postgres` system user to run the server as; else None (ourselves)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise PostgresMissing(
            "running as root and no `postgres` user to run the server as"
        ) from None


def _popen_kwargs(root: Path, run_as: pwd.struct_passwd | None) -> dict[str, Any]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C"}
    kwargs: dict[str, Any] = {"cwd": str(root), "env": env}
    if run_as:
        env["HOME"] = str(root)
        env["USER"] = env["LOGNAME"] = run_as.pw_name
        kwargs.update(user=run_as.pw_uid, group=run_as.pw_gid, extra_groups=[])
    return kwargs


def _initdb(bindir: Path, data: Path, root: Path, run_as: pwd.struct_passwd | None) -> None:
    cmd = [
        str(bindir / "initdb"),
        "-D",
        str(data),
        "-U",
        SUPERUSER,
        "--auth=trust",
        "--encoding=UTF8",
        "--no-locale",
        "--no-sync",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, **_popen_kwargs(root, run_as))
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
        raise PostgresMissing(f"initdb failed: {' '.join(tail)}")


def _spawn(
    bindir: Path,
    data: Path,
    sockets: Path,
    port: int,
    root: Path,
    run_as: pwd.struct_passwd | None,
    settings: dict[str, str],
) -> subprocess.Popen[bytes]:
    cmd = [str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(sockets)]
    for key, value in {**SETTINGS, **settings}.items():
        cmd += ["-c", f"{key}={value}"]
    log = open(root / "server.log", "ab")  # noqa: SIM115 - closed once the server holds it
    try:
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # stopped by stop()/the watchdog, not by a Ctrl-C
            **_popen_kwargs(root, run_as),
        )
    finally:
        log.close()


def _wait_ready(server: subprocess.Popen[bytes], data: Path, log: Path) -> tuple[bool, str]:
    """True once postmaster.pid says `ready`; False (and the log's last line) if it exited."""
    deadline = time.monotonic() + READY_TIMEOUT
    pidfile = data / "postmaster.pid"
    while time.monotonic() < deadline:
        if server.poll() is not None:
            lines = log.read_text(errors="replace").strip().splitlines()
            return False, lines[-1] if lines else f"exit {server.returncode}"
        try:
            lines = pidfile.read_text().splitlines()
        except (FileNotFoundError, PermissionError):
            lines = []
        if len(lines) >= 8 and lines[7].strip() == "ready":
            return True, ""
        time.sleep(0.02)
    server.kill()
    server.wait()
    return False, f"not ready after {READY_TIMEOUT:.0f}s"

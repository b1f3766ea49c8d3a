"""Escape probes run by an unprivileged user (test_unprivileged.py starts this with setpriv).

Prints one JSON object: probe name -> [blocked: bool, detail]. Uses only the stdlib and the
sandbox package so the system Python can run it without the venv.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import sandbox
from reef_cli.core.errors import SandboxUnavailable
from sandbox import Limits

SECRET = "REEF-PLANTED-SECRET-unpriv"
results: dict[str, list[object]] = {}


def record(name: str, blocked: bool, detail: object) -> None:
    results[name] = [bool(blocked), str(detail)[-300:]]


def py(code: str, wd: str, **kw: object) -> sandbox.Result:
    return sandbox.run([sys.executable, "-c", code], wd, **kw)  # type: ignore[arg-type]


def main() -> None:
    base = tempfile.mkdtemp(prefix="reef-unpriv-")
    home = os.path.join(base, "home")
    os.makedirs(os.path.join(home, ".ssh"))
    os.makedirs(os.path.join(home, ".config", "reef"))
    for rel in (".ssh/id_rsa", ".config/reef/token"):
        with open(os.path.join(home, rel), "w") as fh:
            fh.write(SECRET)
    os.environ["HOME"] = home
    os.environ["GITHUB_TOKEN"] = SECRET
    wd = os.path.join(base, "work")
    os.mkdir(wd)

    r = sandbox.run(
        ["sh", "-c", f"cat {home}/.ssh/id_rsa {home}/.config/reef/token ~/.ssh/id_rsa"], wd
    )
    record("home secrets", SECRET not in r.stdout, r.stderr)
    r = sandbox.run(["cat", "/etc/shadow"], wd)
    record("/etc/shadow", r.returncode != 0 and "root:" not in r.stdout, r.stderr)
    outside = os.path.join(base, "outside")
    r = sandbox.run(["sh", "-c", f"echo x > {outside}; echo x > /usr/escape; echo ok > inside"], wd)
    record(
        "write outside",
        not os.path.exists(outside) and os.path.exists(os.path.join(wd, "inside")),
        r.stderr,
    )

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]
    hits: list[int] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            hits.append(1)
            conn.sendall(b"svc\n")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    code = f"import socket\ntry:\n socket.create_connection(('127.0.0.1', {port}), 3); print('open')\nexcept OSError as e: print(type(e).__name__)"  # noqa: E501
    r = py(code, wd)
    record(
        "other loopback service",
        r.stdout.strip() == "ConnectionRefusedError" and not hits,
        r.stdout,
    )
    try:
        r = py(
            f"import socket; print(socket.create_connection(('127.0.0.1', {port}), 5).recv(9))",
            wd,
            allow=[("127.0.0.1", port)],
        )
        results["allowed port"] = [
            "reachable" if "svc" in r.stdout else "unreachable",
            r.stderr[-200:],
        ]
    except SandboxUnavailable as exc:
        results["allowed port"] = ["unavailable", exc.one_line()]
    code = (
        "import socket, subprocess\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "try:\n s.connect(('198.51.100.7', 9)); print('routable')\nexcept OSError as e: print(e.errno)\n"  # noqa: E501
        "print(subprocess.run(['ip', 'route', 'get', '198.51.100.7'], capture_output=True).returncode)"  # noqa: E501
    )
    r = py(code, wd)
    record(
        "non-loopback route",
        r.stdout.split()[:1] == ["101"] and r.stdout.split()[1:] != ["0"],
        r.stdout,
    )

    tag = uuid.uuid4().hex
    host = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)", f"host-{tag}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    code = (
        f"import os\nm = ('host-' + {tag!r}).encode()\n"
        "print(any(m in open(f'/proc/{p}/cmdline', 'rb').read() for p in os.listdir('/proc') if p.isdigit()))"  # noqa: E501
    )
    r = py(code, wd)
    host.kill()
    host.wait()
    record("host processes", r.stdout.strip() == "False", r.stdout)

    r = sandbox.run(
        ["sh", "-c", f"setsid sh -c 'sleep 300 # orphan-{tag}' >/dev/null 2>&1 & echo ok"], wd
    )
    time.sleep(0.5)
    alive = [p for p in os.listdir("/proc") if p.isdigit() and _cmd_has(p, f"orphan-{tag}")]
    record("orphan child", not alive, alive)

    code = (
        "import os, time\nn = 0\ntry:\n while n < 2000:\n  if os.fork() == 0:\n   time.sleep(30); os._exit(0)\n"  # noqa: E501
        "  n += 1\n print('unblocked', n)\nexcept OSError:\n print('blocked', n)"
    )
    r = py(code, wd, limits=Limits(pids=40, wall_s=30))
    parts = r.stdout.split()
    record("fork bomb", parts[:1] == ["blocked"] and int(parts[1]) <= 40, r.stdout)
    r = py("x = []\nwhile True: x.append(bytearray(64 << 20))", wd, limits=Limits(memory_mb=512))
    record("memory hog", "MemoryError" in r.stderr, r.stderr)
    r = py("while True: pass", wd, limits=Limits(wall_s=1))
    record("endless loop", r.timed_out and r.duration_s < 5, r.duration_s)
    r = py("import os; print(dict(os.environ))", wd)
    record("env secrets", SECRET not in r.stdout and r.returncode == 0, r.stdout)
    print(json.dumps({"uid": os.getuid(), "results": results}))
    shutil.rmtree(base, ignore_errors=True)


def _cmd_has(pid: str, marker: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return marker.encode() in fh.read()
    except OSError:
        return False


if __name__ == "__main__":
    main()

"""The escape suite, run as the calling user (root here): each attempt must be blocked."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import sandbox
from sandbox import Limits

from .conftest import SECRET, Listener, host_pids_with, needs_bwrap, needs_pasta, py

pytestmark = needs_bwrap


def test_fake_home_secrets_are_invisible(work: Path, fake_home: Path) -> None:
    code = f"""
import os, json
out = {{}}
for p in [{str(fake_home / ".ssh" / "id_rsa")!r}, {str(fake_home / ".config" / "reef" / "token")!r},
          os.path.expanduser("~/.ssh/id_rsa"), os.path.expanduser("~/.config/reef/token")]:
    try:
        out[p] = open(p).read()
    except OSError as e:
        out[p] = type(e).__name__
out["home"] = os.environ["HOME"]
out["home_entries"] = os.listdir(os.environ["HOME"])
print(json.dumps(out))
"""
    res = py(code, work)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert SECRET not in res.stdout
    assert out["home"] != str(fake_home)
    assert out["home_entries"] == []
    for key, value in out.items():
        if key.startswith("/"):
            assert value in ("FileNotFoundError", "PermissionError"), (key, value)


def test_real_root_files_and_shadow_are_unreadable(work: Path) -> None:
    planted = Path("/root") / f".reef-sandbox-test-{uuid.uuid4().hex}"
    can_plant = os.access("/root", os.W_OK)
    if can_plant:
        planted.write_text(SECRET)
    try:
        res = sandbox.run(
            ["sh", "-c", f"cat /etc/shadow; cat /etc/gshadow; cat {planted}; ls -a /root"], work
        )
    finally:
        planted.unlink(missing_ok=True)
    assert SECRET not in res.stdout
    assert "root:" not in res.stdout  # no shadow line
    assert "/etc/shadow" in res.stderr  # the read was attempted and refused
    if os.path.exists("/etc/shadow") and os.geteuid() == 0:
        assert "Permission denied" in res.stderr or "No such file" in res.stderr


def test_writes_outside_the_work_dir_do_not_reach_the_host(work: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    targets = [
        str(outside),
        "/usr/reef-escape",
        "/etc/reef-escape",
        "/tmp/reef-escape-" + uuid.uuid4().hex,
    ]
    code = f"""
import json
out = {{}}
for p in {targets!r} + ["inside.txt"]:
    try:
        open(p, "w").write("x")
        out[p] = "written"
    except OSError as e:
        out[p] = type(e).__name__
print(json.dumps(out))
"""
    res = py(code, work)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["inside.txt"] == "written"
    assert (work / "inside.txt").read_text() == "x"
    assert out["/usr/reef-escape"] != "written"
    assert out["/etc/reef-escape"] != "written"
    for t in targets:
        assert not os.path.exists(t), t  # /tmp inside is private; the rest was refused


def test_work_dir_ownership_is_restored(work: Path) -> None:
    (work / "existing").write_text("a")
    before = os.stat(work).st_uid, os.stat(work / "existing").st_uid
    res = sandbox.run(
        ["sh", "-c", "echo b >> existing; mkdir -p sub; echo c > sub/new; id -u"], work
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[-1] != "0"  # never host root inside
    assert (os.stat(work).st_uid, os.stat(work / "existing").st_uid) == before
    assert os.stat(work / "sub" / "new").st_uid == before[0]
    assert (work / "existing").read_text() == "ab\n"


@needs_pasta
def test_allowed_port_reachable_from_python_but_not_a_second_service(
    work: Path, listeners: tuple[Listener, Listener]
) -> None:
    allowed, other = listeners
    code = f"""
import socket, json
out = {{}}
for name, port in (("allowed", {allowed.port}), ("other", {other.port})):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        out[name] = s.recv(64).decode().strip()
    except OSError as e:
        out[name] = type(e).__name__
print(json.dumps(out))
"""
    res = py(code, work, allow=[("127.0.0.1", allowed.port)])
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["allowed"] == "allowed-service"
    assert out["other"] == "ConnectionRefusedError"
    assert other.hits == 0


@needs_pasta
def test_allowed_port_reachable_from_node(work: Path, listeners: tuple[Listener, Listener]) -> None:
    node = shutil.which("node")
    if not node:
        pytest.skip("node is not installed")
    allowed, other = listeners
    js = f"""
const net = require('net');
const c = net.connect({allowed.port}, '127.0.0.1');
c.on('data', d => {{ process.stdout.write('got:' + d); c.destroy();
  const o = net.connect({other.port}, '127.0.0.1');
  o.on('error', e => {{ console.log('other:' + e.code); }});
  o.on('data', d => {{ console.log('other:open'); o.destroy(); }});
}});
c.on('error', e => {{ console.log('allowed:' + e.code); }});
"""
    res = sandbox.run(
        [node, "-e", js],
        work,
        allow=[("127.0.0.1", allowed.port)],
        limits=Limits.for_node(256, wall_s=30),
    )
    assert res.returncode == 0, res.stderr
    assert "got:allowed-service" in res.stdout
    assert "other:ECONNREFUSED" in res.stdout
    assert other.hits == 0


def test_no_port_is_reachable_without_allow(
    work: Path, listeners: tuple[Listener, Listener]
) -> None:
    allowed, _ = listeners
    code = f"""
import socket
try:
    socket.create_connection(("127.0.0.1", {allowed.port}), timeout=5)
    print("open")
except OSError as e:
    print(type(e).__name__)
"""
    res = py(code, work)
    assert res.stdout.strip() == "ConnectionRefusedError"
    assert allowed.hits == 0


@pytest.mark.parametrize("with_pasta", [False, True])
def test_non_loopback_addresses_have_no_route(
    work: Path, listeners: tuple[Listener, Listener], with_pasta: bool
) -> None:
    # Checked with route lookups and a UDP connect (which sends nothing): never real traffic.
    if with_pasta and not shutil.which("pasta"):
        pytest.skip("pasta (passt) not installed")
    allow = [("127.0.0.1", listeners[0].port)] if with_pasta else []
    code = """
import socket, subprocess, json
out = {}
for addr in ("198.51.100.7", "192.0.2.1", "8.8.8.8"):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect((addr, 9))
        out[addr] = "routable"
    except OSError as e:
        out[addr] = e.errno
    r = subprocess.run(["ip", "route", "get", addr], capture_output=True, text=True)
    out["ip:" + addr] = (r.returncode, r.stderr.strip())
out["routes"] = open("/proc/net/route").read().splitlines()[1:]
print(json.dumps(out))
"""
    res = py(code, work, allow=allow)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    import errno

    for addr in ("198.51.100.7", "192.0.2.1", "8.8.8.8"):
        assert out[addr] == errno.ENETUNREACH, out
        rc, err = out["ip:" + addr]
        assert rc != 0 and "unreachable" in err.lower(), out
    assert out["routes"] == []


def test_host_processes_are_invisible(work: Path) -> None:
    tag = uuid.uuid4().hex
    host = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", f"reef-host-marker-{tag}"]
    )
    try:
        # The marker is assembled inside, so the sandboxed command line does not hold it.
        code = f"""
import os
marker = ("reef-host-" + "marker-" + {tag!r}).encode()
pids = [p for p in os.listdir("/proc") if p.isdigit()]
seen = any(marker in open(f"/proc/{{p}}/cmdline", "rb").read() for p in pids)
print(len(pids), seen)
"""
        res = py(code, work)
    finally:
        host.kill()
        host.wait()
    count, seen = res.stdout.split()
    assert seen == "False"
    assert int(count) < 10


def test_no_child_outlives_the_run(work: Path) -> None:
    marker = f"reef-orphan-{uuid.uuid4().hex}"
    script = f"setsid sh -c 'sleep 300 # {marker}' </dev/null >/dev/null 2>&1 & nohup sh -c 'sleep 300 # {marker}2' >/dev/null 2>&1 & echo started"  # noqa: E501
    res = sandbox.run(["sh", "-c", script], work)
    assert res.stdout.strip() == "started"
    deadline = time.monotonic() + 3
    while host_pids_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_pids_with(marker) == []


def test_fork_bomb_is_capped(work: Path) -> None:
    code = """
import os, time
n = 0
try:
    while n < 2000:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError as e:
    print("blocked", n, e.errno, flush=True)
else:
    print("unblocked", n, flush=True)
"""
    start = time.monotonic()
    res = py(code, work, limits=Limits(pids=40, wall_s=60))
    word, count, *_ = res.stdout.split()
    assert word == "blocked", res.stdout
    assert int(count) <= 40
    assert time.monotonic() - start < 20  # the children died with the sandbox, not at 30 s


def test_memory_hog_is_stopped(work: Path) -> None:
    code = "x = []\nwhile True: x.append(bytearray(64 * 1024 * 1024))"
    res = py(code, work, limits=Limits(memory_mb=512, wall_s=30))
    assert res.returncode != 0
    assert "MemoryError" in res.stderr
    assert not res.timed_out


def test_endless_loop_hits_the_wall_clock(work: Path) -> None:
    res = py("while True: pass", work, limits=Limits(wall_s=1.0))
    assert res.timed_out
    assert res.killed_by == "wall"
    assert res.duration_s < 5


def test_cpu_limit_kills(work: Path) -> None:
    res = py("while True: pass", work, limits=Limits(cpu_s=1, wall_s=20))
    assert not res.timed_out
    assert res.killed_by == "cpu"


def test_parent_environment_secrets_do_not_leak(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    res = py("import os, json; print(json.dumps(dict(os.environ)))", work, env={"GATEWAY": "x"})
    env = json.loads(res.stdout)
    assert SECRET not in res.stdout
    assert env["GATEWAY"] == "x"
    assert set(env) <= {"PATH", "HOME", "LANG", "TMPDIR", "USER", "LOGNAME", "GATEWAY", "PWD"}


def test_output_streams_while_running(work: Path) -> None:
    seen: list[tuple[float, str, str]] = []
    code = "import sys, time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('err', file=sys.stderr)"  # noqa: E501
    start = time.monotonic()
    res = py(code, work, on_output=lambda s, t: seen.append((time.monotonic() - start, s, t)))
    assert res.stdout == "first\n"
    assert "err" in res.stderr
    first = next(t for t, s, text in seen if s == "stdout")
    assert first < res.duration_s - 1.0  # arrived before the command ended


def test_interpreter_from_a_venv_runs_inside(work: Path) -> None:
    res = py("import sys; print(sys.prefix)", work)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == sys.prefix

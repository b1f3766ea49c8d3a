"""Issue 11, item 20: a pasta that is installed but fails says why (its own reason and a fix
for it), and only a missing pasta says "apt-get install passt"."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import sandbox
from reef_cli.core.errors import SandboxUnavailable
from sandbox import _pasta

from .conftest import needs_bwrap, needs_pasta

REPO = Path(__file__).resolve().parents[2]


def test_an_installed_pasta_that_fails_names_its_own_reason() -> None:
    stderr = "Failed to send 47 bytes to syslog\nExternal interface not usable\n"
    err = _pasta.failed("/usr/bin/pasta", [8901], stderr, False, 1)
    line = err.one_line()
    assert "pasta (/usr/bin/pasta) is installed but failed" in line
    assert "External interface not usable" in line
    assert "syslog" not in line
    assert "apt-get install" not in line
    assert "route" in (err.hint or "") and "loopback" in (err.hint or "")


def test_a_silent_failure_and_a_hang_are_told_apart() -> None:
    silent = _pasta.failed("pasta", [1], "", False, 3).one_line()
    assert "exited with status 3" in silent and "apt-get" not in silent
    hung = _pasta.failed("pasta", [1], "", True, None).one_line()
    assert "did not listen within" in hung and "apt-get" not in hung


@needs_bwrap
def test_a_missing_pasta_says_install_it(
    work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bwrap = shutil.which("bwrap")
    setpriv = shutil.which("setpriv")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in (bwrap, setpriv):
        if tool:
            (bindir / os.path.basename(tool)).symlink_to(tool)
    monkeypatch.setenv("PATH", str(bindir))  # bwrap and setpriv, but no pasta
    with pytest.raises(SandboxUnavailable) as err:
        sandbox.run(["true"], work, allow=[("127.0.0.1", 9)])
    assert "not installed" in err.value.message
    assert "apt-get install passt" in (err.value.hint or "")


@needs_bwrap
@needs_pasta
def test_pasta_in_a_loopback_only_namespace_names_the_real_cause(work: Path) -> None:
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or not unshare:
        pytest.skip("making a network namespace with `unshare -n` needs root here")
    code = (
        "import socket, sys, sandbox\n"
        "from reef_cli.core.errors import ReefError\n"
        "srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(1)\n"
        "try:\n"
        "    sandbox.run(['true'], sys.argv[1], allow=[('127.0.0.1', srv.getsockname()[1])])\n"
        "    print('RAN')\n"
        "except ReefError as exc:\n"
        "    print('ERROR', exc.one_line())\n"
    )
    # Only loopback in this namespace: no other interface, no default route.
    script = 'ip link set lo up 2>/dev/null; exec "$0" "$@"'
    out = subprocess.run(
        [unshare, "-n", "sh", "-c", script, sys.executable, "-c", code, str(work)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    if line == "RAN":
        pytest.skip("this pasta works without a host interface")
    assert line.startswith("ERROR pasta (") and "is installed but failed" in line, line
    assert "apt-get install" not in line, line
    reason = line.split("failed to forward port(s)", 1)[1].split(":", 1)[1].split("(fix:")[0]
    assert reason.strip() and "exit status" not in reason, line

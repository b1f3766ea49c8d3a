"""The escape suite again, with Reef itself started by an unprivileged user."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import needs_bwrap

pytestmark = needs_bwrap
REPO = Path(__file__).resolve().parents[2]
PROBES = [
    "home secrets",
    "/etc/shadow",
    "write outside",
    "other loopback service",
    "non-loopback route",
    "host processes",
    "orphan child",
    "fork bomb",
    "memory hog",
    "endless loop",
    "env secrets",
]


def _unprivileged_uid() -> int:
    for entry in pwd.getpwall():
        if 1000 <= entry.pw_uid < 65534:
            return entry.pw_uid
    subprocess.run(["useradd", "--system", "--no-create-home", "reef-sbx-test"], check=True)
    return pwd.getpwnam("reef-sbx-test").pw_uid


@pytest.fixture(scope="module")
def probe_results() -> dict[str, object]:
    if os.geteuid() != 0:
        pytest.skip("already unprivileged: test_escape.py covers this user")
    if not shutil.which("setpriv"):
        pytest.skip("setpriv (util-linux) is missing: cannot switch to an unprivileged user")
    python = shutil.which("python3", path="/usr/bin:/bin")
    if not python:
        pytest.skip("no system python3 an unprivileged user can run")
    uid = _unprivileged_uid()
    if (
        not os.access(REPO / "sandbox" / "__init__.py", os.R_OK)
        or (REPO.stat().st_mode & 0o005) != 0o005
    ):
        pytest.skip(f"{REPO} is not readable by other users")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "LANG": "C.UTF-8"}
    out = subprocess.run(
        [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--",
            python,
            str(Path(__file__).with_name("unpriv_probe.py")),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert data["uid"] == uid != 0
    return data["results"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("probe", PROBES)
def test_unprivileged_escape_is_blocked(probe_results: dict[str, list[object]], probe: str) -> None:
    blocked, detail = probe_results[probe]
    assert blocked is True, f"{probe}: {detail}"


def test_unprivileged_allowed_port(probe_results: dict[str, list[object]]) -> None:
    state, detail = probe_results["allowed port"]
    if state == "unavailable":
        # No silent degrade: pasta needs /dev/net/tun, which only root may open here.
        assert "/dev/net/tun" in str(detail)
        pytest.skip(f"non-root pasta unavailable here: {detail}")
    assert state == "reachable", detail

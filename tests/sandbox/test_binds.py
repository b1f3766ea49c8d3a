"""Issue 11, item 1: a program under $HOME runs inside, but no other path under $HOME, the
Reef state dir or a secret dir is visible (only the program's own files are bound)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import sandbox
from reef_cli.core.errors import SandboxError
from sandbox import Limits
from sandbox._binds import Protected, program_binds

from .conftest import SECRET, needs_bwrap

pytestmark = needs_bwrap

PROBE_SH = """#!/bin/sh
for f in "$@"; do
  if [ -e "$f" ]; then echo "VISIBLE $f"; fi
done
echo "LS $(ls -A "$(dirname "$0")" | tr '\\n' ' ')"
echo ran
"""


@pytest.fixture(autouse=True)
def person_umask() -> Iterator[None]:
    """Files these tests plant are the person's (0644/0755), whatever umask an earlier test
    left this process with (looking up the state dir tightens it to 077)."""
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake $HOME with the default state dir (REEF_HOME unset) and planted secrets."""
    h = tmp_path / "h"
    for rel in (
        ".ssh/id_rsa",
        ".local/share/reef/records.sqlite3",
        ".local/share/reef/token",
        ".local/secret.txt",
        ".local/bin/sibling-secret",
        "bin/sibling-secret",
        "secret.txt",
        ".nvm/secret.txt",
        ".claude/.credentials.json",
    ):
        (h / rel).parent.mkdir(parents=True, exist_ok=True)
        (h / rel).write_text(SECRET)
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.delenv("REEF_HOME", raising=False)
    return h


def _secrets(h: Path) -> list[str]:
    return [
        str(h / ".ssh" / "id_rsa"),
        str(h / ".local" / "share" / "reef" / "records.sqlite3"),
        str(h / ".local" / "share" / "reef"),
        str(h / ".local" / "secret.txt"),
        str(h / ".local" / "bin" / "sibling-secret"),
        str(h / "bin" / "sibling-secret"),
        str(h / "secret.txt"),
        str(h / ".nvm" / "secret.txt"),
        str(h / ".claude"),
    ]


def _script(path: Path, text: str = PROBE_SH) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def _assert_ran_blind(res: sandbox.Result, listing: str) -> None:
    assert res.returncode == 0, res.stderr
    assert "ran" in res.stdout.split(), res.stdout
    assert "VISIBLE" not in res.stdout, res.stdout
    assert SECRET not in res.stdout
    ls = next(ln for ln in res.stdout.splitlines() if ln.startswith("LS "))
    assert ls.split()[1:] == listing.split(), ls


def test_tool_in_dot_local_bin_sees_none_of_dot_local(home: Path, work: Path) -> None:
    tool = _script(home / ".local" / "bin" / "tool")
    res = sandbox.run([str(tool), *_secrets(home)], work)
    _assert_ran_blind(res, "tool")


def test_native_claude_layout_binds_only_the_binary(home: Path, work: Path) -> None:
    # Claude Code's native installer: ~/.local/bin/claude -> ~/.local/share/claude/versions/X
    real = _script(home / ".local" / "share" / "claude" / "versions" / "2.1.0")
    (real.parent / "2.0.9").write_text(SECRET)
    link = home / ".local" / "bin" / "claude"
    link.symlink_to(real)
    res = sandbox.run([str(link), *_secrets(home), str(real.parent / "2.0.9")], work)
    _assert_ran_blind(res, "claude")


def test_tool_found_on_the_callers_path_in_home_bin(
    home: Path, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _script(home / "bin" / "mytool")
    monkeypatch.setenv("PATH", f"{home / 'bin'}:{os.environ['PATH']}")
    res = sandbox.run(["mytool", *_secrets(home)], work)  # by name, as a person types it
    _assert_ran_blind(res, "mytool")


def test_venv_under_home_runs_but_home_stays_hidden(home: Path, work: Path) -> None:
    venv = home / "venvs" / "tool"
    real = Path(os.path.realpath(sys.executable))
    (venv / "bin").mkdir(parents=True)
    (venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages").mkdir(
        parents=True
    )
    (venv / "pyvenv.cfg").write_text(
        f"home = {real.parent}\ninclude-system-site-packages = false\n"
    )
    (venv / "bin" / "python").symlink_to(real)
    (home / "venvs" / "other-secret").write_text(SECRET)
    code = (
        "import json, os, sys\n"
        "seen = [p for p in sys.argv[1:] if os.path.exists(p)]\n"
        "print(json.dumps({'prefix': sys.prefix, 'visible': seen,"
        " 'venvs': os.listdir(os.path.dirname(sys.prefix))}))\n"
    )
    secrets = [*_secrets(home), str(home / "venvs" / "other-secret")]
    res = sandbox.run([str(venv / "bin" / "python"), "-c", code, *secrets], work)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["prefix"] == str(venv)
    assert out["visible"] == []
    assert out["venvs"] == ["tool"]


def test_node_install_under_home_runs_its_script(home: Path, work: Path) -> None:
    node = shutil.which("node")
    if not node:
        pytest.skip("node is not installed")
    prefix = home / ".nvm" / "versions" / "node" / "v22.0.0"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "node").symlink_to(os.path.realpath(node))
    cli = prefix / "lib" / "node_modules" / "pkg" / "cli.js"
    js = (
        "#!/usr/bin/env node\n"
        "const fs = require('fs');\n"
        "for (const f of process.argv.slice(2)) if (fs.existsSync(f)) console.log('VISIBLE ' + f);\n"  # noqa: E501
        "for (const d of process.env.LISTDIRS.split(':'))"
        " console.log('LS ' + fs.readdirSync(d).join(' '));\n"
        "console.log('ran');\n"
    )
    _script(cli, js)
    (prefix / "bin" / "tool").symlink_to("../lib/node_modules/pkg/cli.js")
    env = {
        "PATH": f"{prefix / 'bin'}:/usr/bin:/bin",
        "LISTDIRS": f"{prefix.parent}:{home / '.nvm'}",
    }
    res = sandbox.run(
        ["tool", *_secrets(home)], work, env=env, limits=Limits.for_node(256, wall_s=60)
    )
    assert res.returncode == 0, res.stderr
    assert "ran" in res.stdout.split(), res.stdout
    assert "VISIBLE" not in res.stdout and SECRET not in res.stdout, res.stdout
    listings = [ln.split()[1:] for ln in res.stdout.splitlines() if ln.startswith("LS ")]
    assert listings == [["v22.0.0"], ["versions"]], res.stdout


def test_binds_never_hold_a_protected_dir(home: Path, tmp_path: Path) -> None:
    guard = Protected.now()
    tool = _script(home / ".local" / "bin" / "tool")
    for b in program_binds(str(tool), guard=guard):
        assert not guard.holds_home(b), b
        assert guard.secret_overlap(b) is None, b
    assert program_binds(str(tool), guard=guard) == [tool]


@pytest.mark.parametrize(
    "rel", ["", ".local", ".local/share", ".local/share/reef", ".local/share/reef/token", ".ssh"]
)
def test_an_explicit_bind_of_a_protected_dir_is_refused(home: Path, work: Path, rel: str) -> None:
    with pytest.raises(SandboxError) as err:
        sandbox.run(["true"], work, ro_binds=[home / rel])
    line = err.value.one_line()
    assert "refusing" in line and "fix:" in line, line
    assert "\n" not in line


def test_configured_secret_dirs_are_refused_and_never_shown(
    home: Path, work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vault = tmp_path / "vault"
    _script(vault / "bin" / "tool")
    (vault / "key").write_text(SECRET)
    monkeypatch.setenv("REEF_SANDBOX_SECRET_DIRS", f"{tmp_path / 'nothing'}:{vault}")
    with pytest.raises(SandboxError, match="refusing"):
        sandbox.run(["true"], work, ro_binds=[vault])
    with pytest.raises(SandboxError, match="refusing to run"):
        sandbox.run([str(vault / "bin" / "tool")], work)
    # A program next to it still runs, without the secret dir.
    tool = _script(tmp_path / "apps" / "bin" / "tool")
    res = sandbox.run([str(tool), str(vault / "key"), str(vault)], work)
    assert res.returncode == 0 and "VISIBLE" not in res.stdout, res.stdout


def test_a_work_dir_or_home_in_the_state_dir_is_refused(home: Path) -> None:
    inside = home / ".local" / "share" / "reef" / "scratch"
    inside.mkdir()
    with pytest.raises(SandboxError, match="state dir"):
        sandbox.run(["true"], inside)
    elsewhere = home.parent / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(SandboxError, match="state dir"):
        sandbox.run(["true"], elsewhere, home=inside)

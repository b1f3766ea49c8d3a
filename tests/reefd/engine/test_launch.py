"""Engines as child processes: the torch engine starts and serves, one that dies before it
is ready is an EngineError with its log's tail, SGLang names its extra, attach checks."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

pytest.importorskip("torch")

from reef_cli.core.errors import EngineError, ExtraMissing
from reef_cli.server.thread import ServerThread
from reefd import models
from reefd.engine import launch
from reefd.engine.torch_server import create_engine_app


def test_launch_torch_serves_until_stopped(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    engine = launch.launch_torch("tiny", seed=3, log_path=log, weight_version="w7", timeout=120.0)
    try:
        assert engine.kind == "torch" and engine.alive() and engine.log_path == log
        info = httpx.get(f"{engine.url}/model_info", timeout=10).json()
        assert info["model_path"] == "tiny" and info["weight_version"] == "w7"
        # seeded: an unseeded sample from the random tiny model may end early on its EOS
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "seed": 1}
        answer = httpx.post(f"{engine.url}/v1/chat/completions", json=body, timeout=30).json()
        assert answer["usage"]["completion_tokens"] == 3
        checksum = httpx.post(f"{engine.url}/weights_checker", json={"action": "checksum"})
        assert checksum.json()["checksum"] == models.state_checksum(models.load("tiny:3").model)
    finally:
        engine.stop()
    assert engine.proc is not None and engine.proc.returncode is not None
    assert not engine.alive()
    engine.stop()  # twice is fine


def test_an_engine_that_dies_is_an_engine_error_with_its_log_tail(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    with pytest.raises(EngineError) as died:
        launch.launch_torch("no-such-model", log_path=log, timeout=60.0)
    assert "exited with code" in died.value.message
    assert "before it was ready" in died.value.message
    assert "unknown model 'no-such-model'" in died.value.message  # the log's last line
    assert str(log) in (died.value.hint or "")
    assert "\n" not in died.value.message


def test_launch_sglang_names_its_extra_when_missing(tmp_path: Path) -> None:
    if launch.sglang_available():
        pytest.skip("sglang is installed here")
    with pytest.raises(ExtraMissing) as missing:
        launch.launch_sglang("/models/x", log_path=tmp_path / "sglang.log")
    assert "reef[sglang]" in (missing.value.hint or "")
    argv = launch.sglang_argv("/m", host="0.0.0.0", port=30000, extra_args=["--tp", "2"])
    assert argv[1:] == [
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/m",
        "--host",
        "0.0.0.0",
        "--port",
        "30000",
        "--weight-version",
        "base",
        "--tp",
        "2",
    ]


def test_attach_checks_health_and_never_stops_the_engine() -> None:
    with ServerThread(create_engine_app(models.load("tiny"))) as server:
        engine = launch.attach(server.url + "/")
        assert (engine.url, engine.proc, engine.kind) == (server.url, None, "attached")
        engine.stop()
        assert httpx.get(f"{server.url}/health").status_code == 200
    with pytest.raises(EngineError) as gone:
        launch.attach(server.url, timeout=0.3)
    assert "no engine answers" in gone.value.message


def test_log_tail_skips_blank_lines_and_progress_bars(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("one\n\n 10%\r 50%\r100%\nboom: it broke\n\n")
    assert launch.log_tail(log, 3) == ["50%", "100%", "boom: it broke"]
    assert launch.log_tail(tmp_path / "missing.log") == []


def test_an_engine_dies_with_the_process_that_launched_it(tmp_path: Path) -> None:
    """A SIGKILLed reefd leaves no engine behind (PR_SET_PDEATHSIG)."""
    import signal
    import subprocess
    import sys
    import time

    script = (
        "from reefd.engine.launch import launch_torch\n"
        "e = launch_torch('tiny', host='127.0.0.1')\n"
        "print(e.proc.pid, flush=True)\n"
        "import time; time.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        engine_pid = int(parent.stdout.readline())
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 15
        while not _gone(engine_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(engine_pid)
    finally:
        if parent.poll() is None:
            parent.kill()


def _gone(pid: int) -> bool:
    """Exited (no process, or a zombie waiting for its reaper)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except (OSError, IndexError):
        return True

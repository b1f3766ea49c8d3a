"""The background `reef serve` the wrappers use: one per state dir, found only when it is
that state dir's own, stopped by `reef serve stop`, shown by `reef serve status`, and gone
by itself after ``--idle-exit`` seconds with nothing to do.

Every serve here is a real `python -m reef_cli serve` subprocess (no model: its upstream is
a closed port, and nothing here makes a model call)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from reef_cli.cli import serve_process
from reef_cli.core import tokens
from tests.cli.helpers import reef, reef_json

WAIT = 60.0  # an upper bound for things that happen by themselves, never a timing claim


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _gone(pid: int) -> bool:
    return not serve_process._is_reef_serve(pid)


def _wait_until(check, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, f"{what} did not happen within {WAIT:g}s"
        time.sleep(0.2)


@pytest.fixture
def port(monkeypatch: pytest.MonkeyPatch) -> int:
    """The configured serve port (the same for every state dir, as by default)."""
    chosen = _free_port()
    monkeypatch.setenv("REEF_SERVE_PORT", str(chosen))
    monkeypatch.setenv("REEF_UPSTREAM", "http://127.0.0.1:9/v1")  # never called
    return chosen


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """State dirs the test switches between; every serve they recorded is stopped after."""
    used: list[Path] = []
    yield used
    for home in used:
        monkeypatch.setenv("REEF_HOME", str(home))
        serve_process.stop()


def _use(home: Path, homes: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REEF_HOME", str(home))
    homes.append(home)


def _authorized(url: str) -> int:
    token = tokens.main_token(create=False)
    headers = {"authorization": f"Bearer {token}"}
    return httpx.get(f"{url}/reef/scenarios", headers=headers, timeout=10).status_code


def test_two_state_dirs_in_a_row_get_their_own_serves(
    tmp_path: Path, port: int, homes: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _use(tmp_path / "a", homes, monkeypatch)
    first = serve_process.ensure_running()
    assert first.started and first.url == f"http://127.0.0.1:{port}"  # the configured port
    assert _authorized(first.url) == 200

    _use(tmp_path / "b", homes, monkeypatch)
    second = serve_process.ensure_running()
    # a's serve answers on the configured port, but it is not b's (b's token gets a 401
    # there): b gets its own, on a free port it remembers
    assert second.started and second.pid != first.pid and second.url != first.url
    assert _authorized(first.url) == 401
    assert _authorized(second.url) == 200
    assert serve_process.remembered_port() == int(second.url.rsplit(":", 1)[1])
    assert serve_process.read_state()["state_dir"] == str(tmp_path / "b")

    # Each state dir finds its own again, not the other's.
    assert serve_process.ensure_running() == serve_process.Running(
        second.url, second.pid, started=False
    )
    _use(tmp_path / "a", homes, monkeypatch)
    assert serve_process.ensure_running() == serve_process.Running(
        first.url, first.pid, started=False
    )

    # b's serve stopped: b starts a new one on the port it remembered
    _use(tmp_path / "b", homes, monkeypatch)
    assert serve_process.stop()
    assert serve_process.ensure_running().url == second.url


def test_status_and_stop(tmp_path: Path, port: int, homes: list[Path], monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _use(tmp_path / "home", homes, monkeypatch)
    assert reef_json("serve", "status") == {
        "running": False,
        "state_dir": str(tmp_path / "home"),
        "port": None,
    }
    assert "no reef serve running" in reef("serve", "stop")

    monkeypatch.setenv(serve_process.IDLE_ENV, "3600")
    running = serve_process.ensure_running()
    shown = reef_json("serve", "status")
    assert shown["running"] and shown["pid"] == running.pid and shown["url"] == running.url
    assert shown["healthy"] and shown["accepts_token"] and shown["background"]
    assert shown["idle_exit"] == 3600
    text = reef("serve", "status")
    assert f"pid {running.pid}" in text and "idle exit after 3600s" in text

    assert reef("serve", "stop").strip() == f"stopped reef serve (pid {running.pid})"
    assert _gone(running.pid) and not serve_process.state_file().exists()
    assert reef_json("serve", "status") == {
        "running": False,
        "state_dir": str(tmp_path / "home"),
        "port": port,  # remembered for the next start
    }


def test_a_foreground_serve_in_the_same_state_dir_is_used(
    tmp_path: Path, port: int, homes: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`reef serve` run by hand records itself too: the wrapper uses it, and stop stops it."""
    _use(tmp_path / "home", homes, monkeypatch)
    log = (tmp_path / "serve.log").open("wb")
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "reef"), "serve"],
        env=os.environ.copy(),
        stdout=log,
        stderr=log,
    )
    try:
        _wait_until(lambda: serve_process.read_state().get("pid") == process.pid, "serve.json")
        found = serve_process.ensure_running()
        assert found == serve_process.Running(
            f"http://127.0.0.1:{port}", process.pid, started=False
        )
        assert serve_process.read_state()["background"] is False
        assert serve_process.stop()
        assert process.wait(timeout=WAIT) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()
    assert not serve_process.state_file().exists()  # it forgot itself on the way out


def test_background_serve_exits_when_idle(
    tmp_path: Path, port: int, homes: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _use(tmp_path / "home", homes, monkeypatch)
    monkeypatch.setenv(serve_process.IDLE_ENV, "1")
    # An agent session started by a wrapper keeps it up however long it is idle ...
    agent = subprocess.Popen(["sleep", "600"])
    try:
        serve_process.register_client(agent.pid)
        running = serve_process.ensure_running()
        assert running.started and running.pid
        assert serve_process.read_state()["idle_exit"] == 1
        time.sleep(4)  # several idle periods (only a slow machine makes this longer)
        assert not _gone(running.pid), "the serve stopped while an agent session ran"
        assert _authorized(running.url) == 200
    finally:
        agent.kill()
        agent.wait()
    # ... and once it ends, the serve stops by itself and forgets its state file.
    _wait_until(lambda: _gone(running.pid), "the idle exit")
    _wait_until(lambda: not serve_process.state_file().exists(), "serve.json removal")
    assert serve_process.live_clients() == []
    assert "idle for 1s" in (tmp_path / "home" / "serve.log").read_text()
    # The next wrapper call starts a fresh one on the same port.
    again = serve_process.ensure_running()
    assert again.started and again.url == running.url


def test_open_connections_counts_clients_of_this_process_only() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    try:
        assert serve_process.open_connections(port) == 0
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        assert serve_process.open_connections(port) == 1
        accepted.close()
        client.close()
        assert serve_process.open_connections(port) == 0
    finally:
        server.close()


def test_idle_exit_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from reef_cli.core.errors import ServeError

    monkeypatch.setenv(serve_process.IDLE_ENV, "0")
    assert serve_process.idle_exit_seconds() == 0
    monkeypatch.delenv(serve_process.IDLE_ENV)
    assert serve_process.idle_exit_seconds() == serve_process.DEFAULT_IDLE_EXIT
    for bad in ("soon", "-5", "nan", "inf"):
        monkeypatch.setenv(serve_process.IDLE_ENV, bad)
        with pytest.raises(ServeError, match="not a number of seconds"):
            serve_process.idle_exit_seconds()


def test_stale_state_file_is_not_a_serve(tmp_path: Path, homes: list[Path], monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _use(tmp_path / "home", homes, monkeypatch)
    (tmp_path / "home").mkdir()
    other = subprocess.Popen(["sleep", "30"])
    try:
        serve_process.state_file().write_text(
            json.dumps({"pid": other.pid, "url": "http://127.0.0.1:9"})
        )
        assert reef_json("serve", "status")["running"] is False
        assert serve_process.stop(wait=0.5) is True
        assert other.poll() is None  # not signalled: it is not a reef serve
    finally:
        other.kill()
        other.wait()


def test_a_second_serve_does_not_take_the_record_of_a_running_one(
    tmp_path: Path, port: int, homes: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`reef serve` by hand while the wrapper's serve runs on the same port: it cannot bind
    and exits, and the running serve is still the recorded one."""
    _use(tmp_path / "home", homes, monkeypatch)
    running = serve_process.ensure_running()
    done = subprocess.run(
        [str(Path(sys.executable).parent / "reef"), "serve", "--port", str(port)],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert done.returncode != 0
    assert serve_process.read_state()["pid"] == running.pid
    assert serve_process.ensure_running() == serve_process.Running(
        running.url, running.pid, started=False
    )

"""Fixtures for the sandbox escape suite: a work dir, a fake HOME with planted secrets,
loopback listeners, and a skip (with the reason) where this machine has no bwrap."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import sandbox

HAS_BWRAP = bool(shutil.which("bwrap")) and sys.platform.startswith("linux")
needs_bwrap = pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap is not installed here")
needs_pasta = pytest.mark.skipif(not shutil.which("pasta"), reason="pasta (passt) not installed")
SECRET = "REEF-PLANTED-SECRET-7f3a9c"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    wd = tmp_path / "work"
    wd.mkdir()
    return wd


@pytest.fixture
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME pointed at a tmp dir holding an ssh key and a token, as a real one would."""
    home = tmp_path / "fake-home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SECRET}\n")
    (home / ".config" / "reef").mkdir(parents=True)
    (home / ".config" / "reef" / "token").write_text(SECRET)
    monkeypatch.setenv("HOME", str(home))
    return home


class Listener:
    """A TCP service on 127.0.0.1 that answers every connection with its name."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port: int = self.sock.getsockname()[1]
        self.hits = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            conn.sendall(self.name.encode() + b"\n")
            conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def listeners() -> Iterator[tuple[Listener, Listener]]:
    a, b = Listener("allowed-service"), Listener("other-service")
    yield a, b
    a.close()
    b.close()


def py(code: str, work: Path, **kw: object) -> sandbox.Result:
    """Run Python code in the sandbox (the test's own interpreter, bound read-only)."""
    return sandbox.run([sys.executable, "-c", code], work, **kw)  # type: ignore[arg-type]


def host_pids_with(marker: str) -> list[int]:
    """Host processes whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if marker.encode() in fh.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found

"""Issue 23 item 6: tokens take effect at once.

A token created or revoked while `reef serve` runs used to do nothing until a restart (a
revoked token kept its access). The server built the way `reef serve` builds it
(``run.token_set``) runs on a real uvicorn server; tokens are made and revoked with the
real `reef token` CLI; a real `reef serve` child process gets SIGHUP. Plus the cost: the
per-request check, measured side by side with the plain token check it wraps.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from reef_cli.cli.main import app as reef_app
from reef_cli.core import tokens
from reef_cli.server.app import create_app
from reef_cli.server.run import token_set
from reef_cli.server.serve_config import ServeConfig
from tests.fakes.server_thread import ServerThread
from tests.fakes.upstream import FakeUpstream

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _reef(*args: str) -> str:
    result = runner.invoke(reef_app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _created(name: str, scenario: str) -> str:
    out = _reef("token", "create", name, "--scenario", scenario)
    assert "a running `reef serve` accepts it from its next request" in out
    return next(line for line in out.splitlines() if line.startswith(tokens.PREFIX))


def test_a_token_made_or_revoked_while_serving_applies_from_the_next_request(
    reef_home: Path,
) -> None:
    _reef("scenario", "create", "team-a")
    with ServerThread(FakeUpstream().app) as up:
        config = ServeConfig(upstream=up.url + "/v1", upstream_dialect="openai")
        app = create_app(config, tokens=token_set(config))
        with ServerThread(app) as reef:

            def scenarios(token: str) -> int:
                auth = {"authorization": f"Bearer {token}"}
                return httpx.get(reef.url + "/reef/scenarios", headers=auth).status_code

            def chat(token: str) -> int:
                headers = {"x-api-key": token, "x-reef-scenario": "team-a"}
                return httpx.post(
                    reef.url + "/v1/chat/completions", json=CHAT, headers=headers
                ).status_code

            new = _created("ci", "team-a")  # made after the server started
            assert scenarios(new) == 200
            assert chat(new) == 200
            other = _created("other", "team-a")

            out = _reef("token", "revoke", "ci")
            assert "a running `reef serve` refuses it from its next request" in out
            assert scenarios(new) == 401  # the very next request, both route kinds
            assert chat(new) == 401
            assert scenarios(other) == 200  # the rest of the file still holds
            main = tokens.main_token(create=False)
            assert main is not None and scenarios(main) == 200

            # a damaged tokens.json fails closed: no scenario token, the main one works
            tokens.tokens_path().write_text("{not json")
            assert scenarios(other) == 401
            assert scenarios(main) == 200


def test_the_main_token_file_is_reread_when_it_changes(reef_home: Path) -> None:
    """Rotating the main token (delete the file, `reef token` makes a new one) applies
    within MAIN_CHECK_SECONDS: the check here runs on a clock the test moves."""
    now = [0.0]
    tokens.main_token(create=True)
    accepted = tokens.FileTokens(clock=lambda: now[0])
    old = tokens.main_token(create=False)
    assert old is not None and accepted.check(old) is not None
    tokens.token_path().unlink()
    new = tokens.main_token(create=True)
    assert new is not None and new != old
    assert accepted.check(new) is None  # not looked at yet: within the second
    now[0] += tokens.MAIN_CHECK_SECONDS
    assert accepted.check(new) is not None
    assert accepted.check(old) is None


def test_a_rotated_main_token_is_redacted_from_the_logs_once_read(reef_home: Path) -> None:
    """The redaction knew only the main token of start-up: a hand-written one put in the
    token file later (no ``reef_`` shape for the patterns to catch) went to the logs as is."""
    from reef_cli.server import log_redaction

    tokens.main_token(create=True)
    accepted = token_set(ServeConfig(upstream="http://127.0.0.1:9/v1"))
    assert isinstance(accepted, tokens.FileTokens)
    rotated = "Zq8w3Xr5Tn2Lp7Vb4Mc9Hd6"  # no reef_ shape, no trigger word beside it
    tokens.token_path().write_text(rotated + "\n")
    accepted.reload()
    assert accepted.check(rotated) is not None
    assert rotated not in log_redaction.redact(f"a client sent {rotated} as is")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


SERVE = (
    "import sys\n"
    "from reef_cli.server.serve_config import ServeConfig\n"
    "from reef_cli.server.run import serve\n"
    "serve(ServeConfig(port=int(sys.argv[1]), upstream=sys.argv[2], upstream_dialect='openai'),"
    " announce=lambda s: None)\n"
)


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP here")
def test_sighup_rereads_the_token_files(reef_home: Path) -> None:
    """A change the stat cannot see (same inode, size and mtime: an in-place edit with the
    mtime put back) is picked up on SIGHUP, by a real `reef serve` process, which keeps
    serving."""
    main = tokens.main_token(create=True)
    first = tokens.create_scoped("first", ["default"])
    with ServerThread(FakeUpstream().app) as up:
        port = _free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("REEF_TOKEN", None)
        proc = subprocess.Popen(
            [sys.executable, "-c", SERVE, str(port), up.url + "/v1"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_healthy(proc, url)

            def status(token: str) -> int:
                auth = {"authorization": f"Bearer {token}"}
                return httpx.get(url + "/reef/scenarios", headers=auth).status_code

            assert status(first) == 200
            # swap the token's hash in place for another of the same length, mtime kept
            second = tokens.generate()
            path = tokens.tokens_path()
            before = os.stat(path)
            text = path.read_text()
            swapped = text.replace(tokens.digest(first).hex(), tokens.digest(second).hex())
            assert len(swapped) == len(text) and swapped != text
            with open(path, "r+", encoding="utf-8") as handle:
                handle.write(swapped)
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
            assert status(first) == 200  # unseen by the stat: the old hash still holds

            proc.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 30  # the reload runs on its own thread
            while status(second) != 200 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert status(second) == 200
            assert status(first) == 401
            assert status(main) == 200
            assert proc.poll() is None  # SIGHUP did not stop the server
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    assert b"Traceback" not in (proc.stderr.read() if proc.stderr else b"")


def _wait_healthy(proc: subprocess.Popen[bytes], url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read().decode() if proc.stderr else "exited")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError("reef serve did not come up")


def test_the_per_request_check_costs_little_next_to_the_plain_check(reef_home: Path) -> None:
    """The reloading check is the plain digest check plus one stat (and a clock read):
    measured side by side, it stays within a small multiple of the plain check, itself a
    few microseconds, next to a proxied request's hundreds."""
    main = tokens.main_token(create=True)
    assert main is not None
    for n in range(20):
        tokens.create_scoped(f"t{n}", ["default"])
    plain = tokens.TokenSet(main, tokens.list_scoped())
    live = tokens.FileTokens()
    rounds = 2000

    def timed(check: tokens.TokenSet) -> float:
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(rounds):
                check.check(main)
            best = min(best, time.perf_counter() - start)
        return best

    timed(plain), timed(live)  # warm both
    ratio = timed(live) / timed(plain)
    print(f"reloading check / plain check: {ratio:.2f}x")
    assert ratio < 4.0

"""The live loop on the embedded model, end to end: a real `reef serve -c serve.yaml`
process with no upstream (the lite embedded model answers and runs the recipe), five
sessions through the proxy scored with `POST /reef/report`, and SkillClaw run by the loop
in the background to an end — no scripted model anywhere.

What a 135M model writes is not the point (the gate decides); the loop is: the job is
triggered by the batch, ends in a terminal state, consumes the batch when it ended
published or rejected, and the next response carries the release the chain serves."""

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

from reef_cli.core import scenarios
from reef_cli.core.publishing import publish_files
from reef_cli.core.tree import starter_tree

pytestmark = pytest.mark.slow
REEF = str(Path(sys.executable).with_name("reef"))
ENDED = ("published", "pending", "unchanged", "rejected", "invalid", "stopped", "failed")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def served(reef_home: Path, tmp_path: Path) -> Iterator[str]:
    scenarios.create("live")
    publish_files("live", starter_tree().files(), reason="start")
    config = tmp_path / "serve.yaml"
    config.write_text(
        "default_scenario: live\n"
        "reef:\n  recipe: skillclaw\n  batch_size: 5\n  min_interval_s: 0\n  poll_s: 0.5\n"
    )
    port = free_port()
    proc = subprocess.Popen(
        [REEF, "serve", "--port", str(port), "--open", "-c", str(config)],
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "reef serve did not come up"
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


def ask(client: httpx.Client, url: str, session: str, text: str) -> httpx.Response:
    reply = client.post(
        url + "/v1/chat/completions",
        headers={"x-reef-scenario": "live", "x-reef-session": session},
        json={
            "model": "embedded",
            "messages": [{"role": "user", "content": text}],
            "max_tokens": 40,
            "temperature": 0,
        },
    )
    reply.raise_for_status()
    return reply


def test_the_loop_runs_skillclaw_on_the_embedded_model(served: str, reef_home: Path) -> None:
    prompts = [  # five: fewer could never pass the replay gate's sign test (kept, unread)
        "How do I run the tests?",
        "Fix the failing build.",
        "Explain this error.",
        "Add a test for the parser.",
        "Rename the helper.",
    ]
    with httpx.Client(timeout=300) as client:
        for i, prompt in enumerate(prompts):
            reply = ask(client, served, f"live-{i}", prompt)
            assert reply.headers["x-reef-release-id"] == "1"
            receipt = reply.headers["x-reef-agent-record-id"]
            client.post(
                served + "/reef/report",
                headers={"x-reef-scenario": "live"},
                json={
                    "score": 0.2 * i,
                    "feedback": "run the tests before answering",
                    "references": [receipt],
                },
            ).raise_for_status()

        state_file = reef_home / "scenarios" / "live" / "learning.json"
        deadline = time.monotonic() + 900
        last: dict = {}
        while time.monotonic() < deadline:
            if state_file.exists():
                last = json.loads(state_file.read_text()).get("last_run") or {}
                if last.get("state") in ENDED:
                    break
            time.sleep(1)
        assert last.get("state") in ENDED, f"no run ended: {last}"
        assert last["recipe"] == "skillclaw" and last["sessions"] == 5

        chain = scenarios.get("live").chain()
        served_release = chain.served()
        assert served_release is not None
        if last["state"] in ("published", "rejected"):  # the batch was consumed
            mark = json.loads((reef_home / "scenarios" / "live" / "skillclaw.json").read_text())
            assert set(mark["sessions"]) == {f"session:live-{i}" for i in range(5)}
        if last["state"] == "published":
            assert served_release.number == last["release"] == 2
        else:
            assert served_release.number == 1  # nothing published: the served one stays
        after = ask(client, served, "live-next", "Thanks.")
        assert after.headers["x-reef-release-id"] == str(served_release.number)
        status = client.get(served + "/reef/scenarios/live/learning").json()
        assert status["last_run"]["state"] == last["state"]

"""The live half of `reef bench learn`: a real `reef serve` with the live loop on, and the
simulated user who talks to it.

The server is the product as a person runs it (``python -m reef_cli serve``, the embedded
model upstream — the configured one, else the embedded one — and the ``reef:`` keys in a
serve.yaml): nothing here reaches into it. The user is
a minimal agent: before each session it asks the server which release is served
(``GET /reef/harness``) and puts that tree in the system prompt, as an agent with the
release installed would; then one request per session (``x-reef-session``), its checks,
and a report (``POST /reef/report``) with score 1 when every check passed, else 0 and the
complaint for the first failed check (and the persona's facts the prompt touches).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from recipes.personas import Persona, Prompt, judge
from recipes.tasks.runners import render_harness
from reef_cli.core.errors import ServeError

READY_S = 180.0  # the server loads no model before its first request; this is the import
JOB_WAIT_S = 1200.0
# The server stops itself after this long with no request and no job: a bench killed
# with SIGKILL (which runs no cleanup) leaves no server behind for long.
IDLE_EXIT_S = 300  # the longest a live-loop run may take before the bench gives up
_WORD = re.compile(r"[a-z]{4,}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LiveServer:
    """`reef serve` in a child process on a free loopback port, for one state dir."""

    home: Path
    scenario: str
    loop: dict[str, Any]  # the serve.yaml `reef:` keys
    env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LiveServer:
        import httpx

        config = self.home / "serve.yaml"
        config.write_text(yaml.safe_dump({"reef": self.loop}), encoding="utf-8")
        self.port = free_port()
        log = (self.home / "serve.log").open("ab")
        command = [sys.executable, "-m", "reef_cli", "serve", "--port", str(self.port)]
        command += ["--open", "--upstream", "embedded", "--scenario", self.scenario]
        command += ["-c", str(config), "--idle-exit", str(IDLE_EXIT_S)]
        self.proc = subprocess.Popen(
            command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServeError(
                    f"reef serve exited with {self.proc.returncode} before it was ready",
                    f"see {self.home / 'serve.log'}",
                )
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.stop()
        raise ServeError("reef serve was not ready in time", f"see {self.home / 'serve.log'}")

    def stop(self) -> None:
        """SIGTERM to the server's process group (its job child too), then SIGKILL."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@dataclass
class Session:
    """One session of the simulated user, as the curve and the JSON show it."""

    index: int  # 1-based
    prompt: str  # the prompt's id
    release: int | None  # the release the user had installed (served at the time)
    accepted: bool
    failed: list[str]
    complaint: str | None
    receipt: str
    reply_words: int
    seconds: float


def _words(text: str) -> set[str]:
    return {w.rstrip("s") for w in _WORD.findall(text.lower())}


def complaint_for(persona: Persona, prompt: Prompt, complaint: str | None) -> str | None:
    """The user's complaint, with each of the persona's facts that the prompt touches: a
    fact shares with the prompt a word of four or more letters (plurals aside) that no
    other fact has — "legs" in two facts about legs says nothing about which one."""
    if complaint is None:
        return None
    facts = [(fact, _words(fact)) for fact in persona.facts]
    seen = Counter(word for _, words in facts for word in words)
    asked = _words(prompt.text)
    relevant = [fact for fact, words in facts if {w for w in words if seen[w] == 1} & asked]
    return " ".join([complaint, *relevant])


class SimulatedUser:
    """Plays ``persona`` against a running `reef serve`: one session per prompt."""

    def __init__(self, persona: Persona, base_url: str, scenario: str) -> None:
        import httpx

        self.persona = persona
        self.scenario = scenario
        self.client = httpx.Client(base_url=base_url, timeout=600)

    def close(self) -> None:
        self.client.close()

    def served(self) -> tuple[int | None, dict[str, str]]:
        """The served release's number and files, as an agent would install them."""
        reply = self.client.get("/reef/harness", params={"scenario": self.scenario})
        reply.raise_for_status()
        body = reply.json()
        return body["release"].get("number"), body["files"]

    def session(self, index: int, prompt: Prompt) -> Session:
        began = time.monotonic()
        release, files = self.served()
        system = render_harness(files)
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": prompt.text})
        headers = {
            "x-reef-scenario": self.scenario,
            "x-reef-session": f"{self.persona.name}-{index:03d}",
        }
        if release is not None:
            headers["x-reef-release-id"] = str(release)
        reply = self.client.post(
            "/v1/chat/completions",
            headers=headers,
            json={
                "model": "embedded",
                "messages": messages,
                "max_tokens": self.persona.max_tokens,
                "temperature": 0,
            },
        )
        reply.raise_for_status()
        receipt = reply.headers["x-reef-agent-record-id"]
        text = reply.json()["choices"][0]["message"]["content"] or ""
        verdict = judge(self.persona.checks, text, prompt.answer)
        said = complaint_for(self.persona, prompt, verdict.complaint)
        report: dict[str, Any] = {"score": 1.0 if verdict.passed else 0.0, "references": [receipt]}
        if said:
            report["feedback"] = said
        self.client.post(
            "/reef/report", headers={"x-reef-scenario": self.scenario}, json=report
        ).raise_for_status()
        return Session(
            index=index,
            prompt=prompt.id,
            release=release,
            accepted=verdict.passed,
            failed=list(verdict.failed),
            complaint=said,
            receipt=receipt,
            reply_words=len(text.split()),
            seconds=round(time.monotonic() - began, 2),
        )

    def learning(self) -> dict[str, Any]:
        reply = self.client.get(f"/reef/scenarios/{self.scenario}/learning")
        reply.raise_for_status()
        return dict(reply.json())

    def settle(self, reported: int, poll_s: float = 0.5) -> dict[str, Any] | None:
        """Wait until the live loop has counted ``reported`` scored sessions and has no
        run queued or running (the user comes back after it); the last run, if any."""
        deadline = time.monotonic() + JOB_WAIT_S
        while True:
            state = self.learning()
            run = state.get("last_run")
            # Not ``scored_sessions``: the loop updates it before a count that may wait a
            # poll, and a trigger decided on the older count would let her go on while
            # the run her last report starts has not begun.
            counted = (state.get("counts") or {}).get("counted_sessions", 0) >= reported
            waits = (state.get("next_trigger") or {}).get("waits_for")
            active = run is not None and run.get("state") in ("queued", "running")
            if counted and not active and waits not in ("count", "job"):
                return run
            if time.monotonic() > deadline:
                raise ServeError(
                    f"the live loop did not settle in {JOB_WAIT_S:.0f} s (last run: "
                    f"{run and run.get('job')})",
                    "see serve.log in the bench's state dir",
                )
            time.sleep(poll_s)

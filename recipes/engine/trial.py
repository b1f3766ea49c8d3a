"""Trials and task runs: the real agent, with a tree installed, inside the sandbox.

``AgentRunner`` is the one runner the engine uses, for any adapter: it starts a private
`reef serve` (``trial_proxy``) in front of the job's model, so every request the agent
makes is recorded and charged to the job's budget — refused before it is made once the
call budget is spent — and runs the agent through ``Adapter.run_headless`` with a
sandboxed ``Launch``. The ``trial`` check here passes when the agent completed and the
recorded requests show the candidate was loaded (its rule text or skill name reached the
model); the engine then holds the answer (``answer_excerpt``) to the ask — the quality
gate's deterministic minimum and the judge — so a trial passes only when the change
loaded *and* the answer follows the ask. The evidence — agent and version, receipts,
where the change was found, exit status, timings, an excerpt — goes into the release
metadata.

This is the one place recipes reach the server (a trial's gateway is a `reef serve`):
the arrow recipes -> server is allowed, server -> recipes is not (docs/architecture.md).
"""

from __future__ import annotations

import json
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sandbox
from adapters.base import Adapter, Exit, Gateway
from recipes.base import AgentRun, Candidate, Watch
from recipes.tasks import Task, TaskRun, grade
from reef_cli.core import tools
from reef_cli.core.budget import Budget
from reef_cli.core.checks import Check
from reef_cli.core.errors import BudgetExceeded
from reef_cli.core.llm import ModelClient, endpoint_for
from reef_cli.core.records import Record
from reef_cli.core.secrets import scan_text
from reef_cli.core.tokens import TokenSet
from reef_cli.server.app import ReefApp, create_app
from reef_cli.server.embedded_upstream import create_embedded_app
from reef_cli.server.serve_config import ServeConfig
from reef_cli.server.thread import ServerThread

TRIAL_TIMEOUT = 600.0
EXCERPT = 600
DEFAULT_PROBE = "Say in one sentence how you will work on this project."
# Not 429: agents retry a 429 (pi for ~15 s); a 402 they report at once and exit.
REFUSED_STATUS = 402


class BudgetGate:
    """ASGI middleware in front of a trial proxy: each model call the agent makes is
    counted against the job's call and time budget *before* it reaches the model; past
    the budget the agent gets a 402 and the job stops. With a ``watch`` set (a proposer's
    run), each call's body is shown to it first; a reason back stops the agent the same
    way, and ``stopped`` keeps the first reason."""

    def __init__(self, app: ReefApp, budget: Budget) -> None:
        self.app, self.budget = app, budget
        self.state = app.state
        self.refused: BudgetExceeded | None = None
        self.watch: Watch | None = None
        self.stopped: str | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and path.startswith("/v1/")
            and not path.endswith("/count_tokens")
        ):
            if self.watch is not None:
                receive, why = await self._watched(receive, self.watch)
                if why is not None or self.stopped is not None:
                    self.stopped = self.stopped or why
                    await _refuse(send, f"stopped by Reef: {self.stopped}", "stopped")
                    return
            try:
                self.budget.before_call()
                self.budget.charge(tokens=0, calls=1)
            except BudgetExceeded as exc:
                self.refused = exc
                await _refuse(send, exc.message, "budget")
                return
        await self.app(scope, receive, send)

    @staticmethod
    async def _watched(receive: Any, watch: Watch) -> tuple[Any, str | None]:
        """The body read whole and shown to ``watch``; a ``receive`` that replays it."""
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        try:
            why = watch(json.loads(body or b"null"))
        except ValueError:
            why = None  # not JSON: the proxy answers it as it would any bad body
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay, why


async def _refuse(send: Any, message: str, kind: str) -> None:
    body = json.dumps({"error": {"message": message, "type": kind}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": REFUSED_STATUS,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})


@dataclass
class Proxy:
    url: str
    port: int
    token: str
    model: str
    app: ReefApp
    gate: BudgetGate

    def gateway(self, scenario: str) -> Gateway:
        return Gateway(self.url, scenario, self.token, self.model)

    def records(self, session_id: str, wait: float = 10.0) -> list[Record]:
        """The records of one session, once the recorder has written them."""
        recorder = self.app.state.recorder
        if recorder is not None:
            recorder.flush(timeout=wait)
        found = self.app.state.store.list(session_id=session_id, limit=None, oldest_first=True)
        return [r for r in found if r.is_turn]


@contextmanager
def trial_proxy(model: ModelClient, scenario: str) -> Iterator[Proxy]:
    """A private, token-protected `reef serve` on a free loopback port for one job."""
    endpoint = endpoint_for(model.model, model.api_base)
    with ExitStack() as stack:
        if endpoint.url is None:
            upstream = stack.enter_context(ServerThread(create_embedded_app())).url + "/v1"
        else:
            upstream = endpoint.url
        config = ServeConfig(
            host="127.0.0.1",
            port=0,
            upstream=upstream,
            upstream_model=endpoint.model,
            upstream_dialect=endpoint.dialect,
            upstream_key_env=endpoint.key_env,
            default_scenario=scenario,
            # one job's gateway: a writer process would cost more to start than it saves
            record_writer="thread",
        )
        token = "reef-trial-" + secrets.token_urlsafe(24)
        app = create_app(config, tokens=TokenSet(token, []))
        gate = BudgetGate(app, model.budget)
        # In-flight requests are cut at the end of the job: a hung model must not hold it.
        server = stack.enter_context(ServerThread(gate, timeout_graceful_shutdown=1))
        yield Proxy(server.url, server.port, token, endpoint.model, app, gate)


def tokens_of(records: list[Record]) -> int:
    """Tokens the recorded requests used, in and out."""
    return sum((r.input_tokens or 0) + (r.output_tokens or 0) for r in records)


def sandboxed(gateway_port: int) -> Any:
    """A ``Launch`` that runs the agent in the sandbox, reaching only the gateway's port;
    Reef's pinned agents (``.tools/``) are visible read-only."""

    def launch(argv: list[str], workdir: Path, env: dict[str, str], timeout: float) -> Exit:
        result = sandbox.run(
            argv,
            workdir,
            allow=[("127.0.0.1", gateway_port)],
            ro_binds=[tools.tools_bin().parent],
            env=env,
            limits=sandbox.Limits.for_node(heap_mb=1024, wall_s=timeout),
        )
        return Exit(result.returncode, result.stdout, result.stderr, result.timed_out, result.mode)

    return launch


class AgentRunner:
    """The engine's ``Runner`` for one job: the adapter's agent in the sandbox, through a
    private recording proxy to the job's model (``with AgentRunner(...) as runner``)."""

    def __init__(self, adapter: Adapter, scenario: str, model: ModelClient) -> None:
        self.adapter = adapter
        self.scenario = scenario
        self.model = model
        self._stack = ExitStack()
        self._proxy: Proxy | None = None
        self._version: str | None = None

    def __enter__(self) -> AgentRunner:
        self._version = self.adapter.agent_version()  # a missing agent fails before any call
        self._proxy = self._stack.enter_context(trial_proxy(self.model, self.scenario))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    @property
    def proxy(self) -> Proxy:
        if self._proxy is None:
            raise RuntimeError("AgentRunner is used outside its `with` block")
        return self._proxy

    @property
    def agent(self) -> dict[str, str]:
        return {"name": self.adapter.name, "version": self._version or "unknown"}

    def run(
        self, files: dict[str, str], prompt: str, project: dict[str, str] | None = None
    ) -> AgentRun:
        """Run the agent once on ``files`` in a fresh demo project (plus ``project``'s
        files, e.g. a task's tests); charge its tokens."""
        work = Path(tempfile.mkdtemp(prefix="reef-trial-"))
        try:
            (work / "README.md").write_text("# demo project\n\nA tiny project for a Reef trial.\n")
            for name, text in (project or {}).items():  # relative paths (Task validates)
                target = work / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            return self.run_in(work, files, prompt)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def run_in(
        self,
        workdir: Path,
        files: dict[str, str],
        prompt: str,
        *,
        watch: Watch | None = None,
        timeout: float = TRIAL_TIMEOUT,
    ) -> AgentRun:
        """Run the agent once in ``workdir`` (the caller's folder, kept) with ``files``
        installed as its harness; charge its tokens. ``watch`` sees each model call's body
        first and may stop the agent (``AgentRun.stopped``); ``timeout`` bounds the run
        (and the job's time budget bounds it too)."""
        budget = self.model.budget
        budget.check_time()
        gate = self.proxy.gate
        gate.watch, gate.stopped = watch, None
        try:
            transcript = self.adapter.run_headless(
                files,
                prompt,
                workdir,
                self.proxy.gateway(self.scenario),
                launch=sandboxed(self.proxy.port),
                timeout=budget.bounded(timeout),
            )
        finally:
            gate.watch = None
        records = self.proxy.records(transcript.session_id or "")
        if gate.refused is not None:
            raise gate.refused
        budget.charge(tokens=tokens_of(records), calls=0)  # the calls were counted at the gate
        if transcript.timed_out:
            budget.check_time()  # cut off by the wall-time budget: the job stops
        return AgentRun(transcript, records, stopped=gate.stopped)

    def trial(self, candidate: Candidate) -> tuple[Check, dict[str, Any]]:
        """The trial: the agent ran with the candidate, and the change reached the model."""
        probe = candidate.probe or DEFAULT_PROBE
        run = self.run(candidate.files, probe)
        return judge_trial(self.agent, probe, candidate.expect_in_request, run)

    def run_task(self, files: dict[str, str], task: Task) -> TaskRun:
        """``task`` answered by the agent with ``files`` installed; an agent failure or no
        model request is an outage (None), never a zero."""
        run = self.run(files, task.prompt, task.files)
        if not run.transcript.ok or not run.records:
            return grade(task, None)
        return grade(task, run.transcript.stdout, judge=self.model)


def where_found(records: list[Record], text: str) -> dict[str, str] | None:
    """The first recorded request holding ``text``: its receipt and the part of the
    request it sits in (``system``, ``messages[0]`` …), so the evidence shows it."""
    for record in records:
        request = record.request if isinstance(record.request, dict) else {}
        for top in ("system", "instructions"):  # Anthropic's system; Responses' instructions
            value = request.get(top)
            if value is not None and text in json.dumps(value, ensure_ascii=False):
                return {"receipt": record.id, "in": top}
        # chat and Anthropic: ``messages``; the Responses API: ``input`` items (Codex
        # carries AGENTS.md in a user message item)
        key = "messages" if "messages" in request else "input"
        listed = request.get(key)
        if isinstance(listed, str) and text in listed:
            return {"receipt": record.id, "in": key}
        for i, message in enumerate(listed if isinstance(listed, list) else []):
            flat = json.dumps(message, ensure_ascii=False)
            if text in flat:
                role = message.get("role", "?") if isinstance(message, dict) else "?"
                # Claude Code 2.1 carries CLAUDE.md in a <system-reminder> of a user turn
                block = ", system-reminder" if _in_reminder(flat, text) else ""
                return {"receipt": record.id, "in": f"{key}[{i}] ({role}{block})"}
    return None


def _in_reminder(flat: str, text: str) -> bool:
    at = flat.find(text)
    opened = flat.rfind("<system-reminder>", 0, at)
    return opened != -1 and flat.rfind("</system-reminder>", 0, at) < opened


def judge_trial(
    agent: dict[str, str], probe: str, expected: list[str], run: AgentRun
) -> tuple[Check, dict[str, Any]]:
    transcript, records = run.transcript, run.records
    found = {text: where_found(records, text) for text in expected}
    missing = [text for text, where in found.items() if where is None]
    answer = transcript.stdout.strip()
    excerpt = answer[:EXCERPT]
    if scan_text("stdout", excerpt):
        excerpt = "[withheld: the answer looked like it held a secret]"
    name = agent["name"]
    evidence: dict[str, Any] = {
        "agent": name,
        "agent_version": agent["version"],
        "probe": probe,
        "sandbox": transcript.isolation,
        "returncode": transcript.returncode,
        "timed_out": transcript.timed_out,
        "seconds": transcript.seconds,
        "session_id": transcript.session_id,
        "receipts": [r.id for r in records],
        "requests": len(records),
        "tokens": tokens_of(records),
        "loaded": not missing and bool(records),
        "found": [{"text": text[:80], **where} for text, where in found.items() if where],
        "answer_excerpt": excerpt,
    }
    if not transcript.ok:
        why = "timed out" if transcript.timed_out else f"exited {transcript.returncode}"
        tail = transcript.stderr.strip().splitlines()[-1:] or [""]
        evidence["stderr_tail"] = tail[0][:300]
        return Check("trial", "failed", f"{name} {why} in the sandbox"), evidence
    if not records:
        return Check("trial", "failed", f"{name} made no model request"), evidence
    if missing:
        return (
            Check("trial", "failed", f"the change did not reach the model: {missing[0][:80]!r}"),
            evidence,
        )
    if not answer:
        return Check("trial", "failed", f"{name} gave an empty answer"), evidence
    return (
        Check(
            "trial",
            "passed",
            f"{name} {agent['version']} loaded the change and answered ({len(records)} "
            f"request(s), {transcript.seconds}s, sandbox {transcript.isolation})",
        ),
        evidence,
    )

"""Trials: run the real agent, with a candidate tree installed, inside the sandbox.

The agent's inference goes through a private `reef serve` (``trial_proxy``) to the job's
model, so every request it makes is recorded. A trial passes when the agent completed
and the recorded requests show the candidate was loaded (its rule text or skill name
reached the model). The evidence — receipts, exit status, timings, an excerpt — goes into
the release metadata.
"""

from __future__ import annotations

import json
import secrets
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recipes.base import Candidate
from reef_cli.core.gate import Check
from reef_cli.core.llm import ModelClient, endpoint_for

TRIAL_TIMEOUT = 600.0
EXCERPT = 600


@dataclass
class Proxy:
    url: str
    port: int
    token: str
    model: str
    app: Any

    def records(self, session_id: str, wait: float = 10.0) -> list[Any]:
        """The records of one session, once the recorder has written them."""
        recorder = self.app.state.recorder
        if recorder is not None:
            recorder.flush(timeout=wait)
        return list(self.app.state.store.list(session_id=session_id, limit=None, oldest_first=True))


@contextmanager
def trial_proxy(model: ModelClient, scenario: str) -> Iterator[Proxy]:
    """A private, token-protected `reef serve` on a free loopback port for one job."""
    from reef_cli.core.tokens import TokenSet
    from reef_cli.server.app import create_app
    from reef_cli.server.config import ServeConfig
    from reef_cli.server.thread import ServerThread

    endpoint = endpoint_for(model.model, model.api_base)
    with ExitStack() as stack:
        if endpoint.url is None:
            from reef_cli.server.embedded_upstream import create_embedded_app

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
        )
        token = "reef-trial-" + secrets.token_urlsafe(24)
        app = create_app(config, tokens=TokenSet(token, []))
        server = stack.enter_context(ServerThread(app))
        yield Proxy(server.url, server.port, token, endpoint.model, app)


@dataclass
class TrialResult:
    check: Check
    evidence: dict[str, Any] = field(default_factory=dict)


def _tools_root() -> Path:
    from reef_cli.core import tools

    return tools.tools_bin().parent


def tokens_of(records: list[Any]) -> int:
    """Tokens the recorded requests used, in and out."""
    return sum((r.input_tokens or 0) + (r.output_tokens or 0) for r in records)


@dataclass
class PiRun:
    """One sandboxed `pi -p` run and the records its requests left."""

    returncode: int
    timed_out: bool
    stdout: str
    stderr: str
    mode: str
    seconds: float
    session: str
    records: list[Any]

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def run_pi(
    files: dict[str, str], prompt: str, scenario: str, proxy: Proxy, timeout: float
) -> PiRun:
    """Install ``files`` into a fresh pi agent dir and run ``pi -p PROMPT`` sandboxed."""
    import sandbox
    from adapters.base import ReleaseToInstall, Routing
    from adapters.pi import PiAdapter
    from reef_cli.core.tree import content_hash

    work = Path(tempfile.mkdtemp(prefix="reef-trial-"))
    session = f"trial-{uuid.uuid4().hex[:12]}"
    try:
        agent_dir = work / "agent"
        (work / "README.md").write_text("# demo project\n\nA tiny project for a Reef trial.\n")
        adapter = PiAdapter(models=[proxy.model], discover_models=False)
        routing = Routing(base_url=proxy.url, scenario=scenario)
        release = ReleaseToInstall(scenario, 0, dict(files), content_hash(files))
        adapter.install(release, agent_dir, routing)
        argv, extra = adapter.wrapper(agent_dir, routing, ["-p", prompt])
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            **extra,
            "REEF_SESSION_ID": session,
            "REEF_TOKEN": proxy.token,
            "REEF_PI_NOTICE": "0",
            "PI_OFFLINE": "1",
            "PI_SKIP_VERSION_CHECK": "1",
            "PI_TELEMETRY": "0",
        }
        started = time.monotonic()
        result = sandbox.run(
            argv,
            work,
            allow=[("127.0.0.1", proxy.port)],
            ro_binds=[_tools_root()],
            env=env,
            limits=sandbox.Limits.for_node(heap_mb=1024, wall_s=timeout),
        )
        seconds = round(time.monotonic() - started, 2)
        records = proxy.records(session)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return PiRun(
        result.returncode,
        result.timed_out,
        result.stdout,
        result.stderr,
        result.mode,
        seconds,
        session,
        records,
    )


def run_pi_trial(
    candidate: Candidate, scenario: str, proxy: Proxy, timeout: float = TRIAL_TIMEOUT
) -> TrialResult:
    """The trial: the agent ran with the candidate, and the change reached the model."""
    from reef_cli.core.secrets import scan_text

    probe = candidate.probe or "Say in one sentence how you will work on this project."
    run = run_pi(candidate.files, probe, scenario, proxy, timeout)
    records = run.records
    requests = [json.dumps(r.request, ensure_ascii=False) for r in records]
    missing = [text for text in candidate.expect_in_request if not any(text in q for q in requests)]
    answer = run.stdout.strip()
    excerpt = answer[:EXCERPT]
    if scan_text("stdout", excerpt):
        excerpt = "[withheld: the answer looked like it held a secret]"
    evidence = {
        "agent": "pi",
        "probe": probe,
        "sandbox": run.mode,
        "returncode": run.returncode,
        "timed_out": run.timed_out,
        "seconds": run.seconds,
        "session_id": run.session,
        "receipts": [r.id for r in records],
        "requests": len(records),
        "tokens": tokens_of(records),
        "loaded": not missing and bool(records),
        "answer_excerpt": excerpt,
    }
    if not run.ok:
        why = "timed out" if run.timed_out else f"exited {run.returncode}"
        tail = run.stderr.strip().splitlines()[-1:] or [""]
        evidence["stderr_tail"] = tail[0][:300]
        return TrialResult(Check("trial", "failed", f"pi {why} in the sandbox"), evidence)
    if not records:
        return TrialResult(Check("trial", "failed", "pi made no model request"), evidence)
    if missing:
        return TrialResult(
            Check("trial", "failed", f"the change did not reach the model: {missing[0][:80]!r}"),
            evidence,
        )
    if not answer:
        return TrialResult(Check("trial", "failed", "pi gave an empty answer"), evidence)
    return TrialResult(
        Check(
            "trial",
            "passed",
            f"pi loaded the change and answered ({len(records)} request(s), {run.seconds}s, "
            f"sandbox {run.mode})",
        ),
        evidence,
    )

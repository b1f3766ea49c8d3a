"""What the wrappers' sub-commands do over the Reef API (kept out of the CLI shell)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from reef_cli.core.errors import ReefError, ServeError


def _call(method: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """One API call; a transport failure is a one-line ServeError, not a traceback."""
    import httpx

    try:
        response = method(*args, **kwargs)
    except httpx.HTTPError as exc:
        raise ServeError(
            f"reef serve stopped answering ({type(exc).__name__})",
            "see serve.log in the state dir, then try again",
        ) from exc
    return _check(response)


def _client() -> tuple[Any, dict[str, str]]:
    import httpx

    from reef_cli.cli import serve_process
    from reef_cli.core import tokens

    running = serve_process.ensure_running()
    token = tokens.main_token(create=True) or ""
    return httpx.Client(base_url=running.url, timeout=30.0), {"authorization": f"Bearer {token}"}


def _check(response: Any) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        data = {}
    if response.status_code >= 400:
        error = data.get("error", {}) if isinstance(data, dict) else {}
        message = error.get("message") if isinstance(error, dict) else None
        failure = ServeError(
            f"reef serve answered {response.status_code}: {message or response.text[:200]}",
            (error.get("hint") if isinstance(error, dict) else None) or "see `reef serve` logs",
        )
        failure.status_code = response.status_code  # type: ignore[attr-defined]
        raise failure
    return data if isinstance(data, dict) else {"data": data}


def parse_score(text: str | None) -> float | None:
    """``--score``: a finite number; anything else (nan, inf, words) is a one-line error."""
    import math

    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        value = math.nan
        finite = False
    else:
        finite = math.isfinite(value)
    if not finite:
        raise ReefError(
            f"--score {text!r} is not a finite number",
            "pass a finite number such as --score 0.8 or --score -1",
        )
    return value


def report_id(adapter_name: str, scenario: str, session_id: str, receipts: list[str]) -> str:
    """The id a wrapper's report gets by default: the same session and receipts give the
    same id, so `report` run twice stores one report (POST /reef/report is idempotent by
    id)."""
    import hashlib

    key = json.dumps([adapter_name, scenario, session_id, sorted(receipts)])
    return "rep_" + hashlib.sha256(key.encode()).hexdigest()[:24]


def report_last_session(
    adapter_name: str,
    scenario: str,
    target: Path,
    score: float | None,
    feedback: str | None,
    *,
    again: bool = False,
) -> dict[str, Any]:
    """Report on the receipts of the agent's last session with receipts. Stored once per
    session and receipts (an id derived from them) unless ``again``, which adds another."""
    import adapters

    if score is None and not feedback:
        raise ReefError("nothing to report", "pass --score X and/or --feedback TEXT")
    sessions = adapters.get(adapter_name).harvest(target)
    with_receipts = [s for s in sessions if s.receipts]
    if not with_receipts:
        raise ReefError(
            f"no session with receipts found in {target}",
            "run the agent through the wrapper first, then report",
        )
    last = with_receipts[-1]
    body: dict[str, Any] = {
        "references": last.receipts,
        "metadata": {"agent": adapter_name, "session_id": last.session_id},
    }
    if not again:
        body["id"] = report_id(adapter_name, scenario, last.session_id, last.receipts)
    if score is not None:
        body["score"] = score
    if feedback:
        body["feedback"] = feedback
    client, headers = _client()
    with client:
        try:
            return _call(
                client.post,
                "/reef/report",
                json=body,
                headers={**headers, "x-reef-scenario": scenario},
            )
        except ServeError as exc:
            if not again and getattr(exc, "status_code", None) == 409:
                raise ReefError(
                    f"the last session ({last.session_id}) already has report {body['id']} "
                    "with another score or feedback",
                    "pass --again to store another report on the same receipts",
                ) from None
            raise


def submit_filed(adapter_name: str, scenario: str, wait: bool) -> list[dict[str, Any]]:
    """Each ask the agent's ``/evolve`` filed for ``scenario``, oldest first, as a job
    (``submit_evolve``); a sent ask moves to ``asks/sent/`` with its job's id. An ask
    refused now (say the policy changed) stops the run there, the rest kept for later."""
    from reef_cli.core.asks import check_ask, filed_asks, mark_sent
    from reef_cli.core.errors import ReefError

    found = filed_asks(scenario, adapter_name)
    if not found:
        raise ReefError(
            f"no ask filed for {scenario} by {adapter_name}'s /evolve",
            "type /evolve <ask> in the agent, or pass the ask here",
        )
    jobs = []
    for path, data in found:
        job = submit_evolve(adapter_name, scenario, check_ask(str(data["ask"])), wait)
        mark_sent(path, str(job["id"]))
        jobs.append(job)
    return jobs


def submit_evolve(adapter_name: str, scenario: str, ask: str, wait: bool) -> dict[str, Any]:
    from reef_cli.cli._output import console
    from reef_cli.cli._output import markup as m  # what the server answers is data

    client, headers = _client()
    with client:
        job = _call(
            client.post,
            "/reef/evolve",
            json={"ask": ask, "scenario": scenario, "adapter": adapter_name},
            headers=headers,
        )
        console().print(
            m(f"job {job['id']} queued (Reefine, scenario {scenario}, trial on {adapter_name})")
        )
        if not wait:
            console().print(m(f"follow it: GET /reef/jobs/{job['id']}, or rerun with --wait"))
            return job
        last = ""
        while job.get("state") in ("queued", "running"):
            time.sleep(1.0)
            job = _call(client.get, f"/reef/jobs/{job['id']}", headers=headers)
            message = str(job.get("progress", {}).get("message", ""))
            if message and message != last:
                console().print(f"  {m(message)}", soft_wrap=True)
                last = message
    if job.get("state") == "published":
        release, message = m(job.get("release")), m(job.get("message", ""))
        console().print(f"[green]published r{release}[/] — {message}", soft_wrap=True)
    elif job.get("state") == "pending":
        release, message = m(job.get("release")), m(job.get("message", ""))
        console().print(
            f"[yellow]pending r{release}[/] — {message}; it holds "
            f"extension code: review it, then `reef harness promote {release} "
            f"-s {m(scenario)}`",
            soft_wrap=True,
        )
    else:
        raise ReefError(
            f"evolve ended {job.get('state')}: {job.get('message', '')}",
            "see `reef harness versions` and the job's details",
        )
    return job

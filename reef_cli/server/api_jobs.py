"""Evolution jobs over HTTP (`POST /reef/evolve`, `POST /reef/quickstart`,
`POST /reef/harness/proposals`, `GET /reef/jobs/{id}`) and the agent install script
(`GET /reef/harness/install`)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from reef_cli.core import agents, jobs, plugins, scenarios
from reef_cli.core.asks import QUICKSTART_ASK, check_ask
from reef_cli.core.errors import ReefError, ServeError
from reef_cli.core.names import check_name
from reef_cli.core.publishing import gate_files
from reef_cli.core.tokens import Grant
from reef_cli.core.tree import Requires, name_problem, parse_files, with_changes
from reef_cli.server.api import ERRORS, Text, allow, grant_of


class ProposalUnchanged(ReefError):
    """A proposal that changes nothing in the served tree (HTTP 409)."""

    http_status = 409


class EvolveOptions(BaseModel):
    """A recipe's options: GEPA's and SkillClaw's (Reefine takes none)."""

    model_config = ConfigDict(extra="forbid")
    max_metric_calls: int | None = Field(
        None, ge=1, le=1_000_000, description="gepa: task runs the search may spend"
    )
    seed: int | None = Field(None, ge=0, le=2**32 - 1, description="gepa: random seed")
    batch_limit: int | None = Field(
        None, ge=1, le=1000, description="skillclaw: most sessions read in one run"
    )
    threshold: float | None = Field(
        None, ge=0, le=1, description="skillclaw: the verifier's passing score"
    )


class EvolveIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ask: str | None = Field(None, max_length=100_000, description="what should change")
    scenario: str | None = Field(None, max_length=64, description="default: x-reef-scenario")
    recipe: str = Field(
        "reefine",
        max_length=64,
        description="reefine: an ask; gepa: a search on the scenario's tasks.yaml; "
        "skillclaw: skills from the scenario's recorded sessions and their reports; or a "
        "recipe a plugin registers (`reef evolve --help` lists them)",
    )
    adapter: str | None = Field(None, max_length=64, description="agent for the trial")
    options: EvolveOptions = Field(default_factory=EvolveOptions)

    @field_validator("recipe")
    @classmethod
    def _known_recipe(cls, value: str) -> str:
        return _registered(lambda: plugins.recipe(value).name)

    @field_validator("adapter")
    @classmethod
    def _known_adapter(cls, value: str | None) -> str | None:
        return None if value is None else _registered(lambda: agents.get(value).name)


def _registered(name: Callable[[], str]) -> str:
    """The registry's name, or its one-line error as a validation error (a 400)."""
    try:
        return name()
    except ReefError as exc:
        raise ValueError(exc.one_line()) from None


MAX_PROPOSAL_BYTES = 1024 * 1024  # a harness change, not a repository


class ProposalIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scenario: str | None = Field(None, max_length=64, description="default: x-reef-scenario")
    reason: Text = Field(..., min_length=1, description="why: the judge holds it to this")
    files: dict[str, str | None] = Field(
        ...,
        min_length=1,
        max_length=200,
        description="the served tree's changed paths: each one's new text, or null to "
        'remove it (e.g. {"rules/tests.md": "Run the tests first.\\n"})',
    )

    @field_validator("files")
    @classmethod
    def _paths(cls, value: dict[str, str | None]) -> dict[str, str | None]:
        for path in value:
            parts = path.split("/")
            if path.startswith("/") or any(p in ("", ".", "..") for p in parts):
                raise ValueError(f"{path[:200]!r} is not a relative path inside the tree")
            problem = name_problem(path)
            if problem is not None:
                raise ValueError(problem)
        size = sum(len(k) + len(v or "") for k, v in value.items())
        if size > MAX_PROPOSAL_BYTES:
            raise ValueError(f"the change is larger than {MAX_PROPOSAL_BYTES} characters")
        return value


class QuickstartIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ask: str = Field(QUICKSTART_ASK, max_length=100_000, description="what should change")
    scenario: str = Field("quickstart", max_length=64, description="created when new")

    @field_validator("scenario")
    @classmethod
    def _scenario_name(cls, value: str) -> str:
        return _registered(lambda: check_name("scenario", value))


def _queue(
    request: Request,
    scenario: str,
    recipe: str,
    ask: str | None,
    adapter: str | None = None,
    options: dict[str, Any] | None = None,
    *,
    flow: str = "evolve",
    publish: str = "auto",
) -> dict[str, Any]:
    """Create the job and hand it to this server's runner (``core.jobs``, the queue)."""
    worker = request.app.state.jobs
    if worker is None:
        raise ServeError("this server runs no jobs", "use the main `reef serve`")
    job = jobs.create(scenario, recipe, ask, adapter, options, flow=flow, publish=publish)
    refused = jobs.submit(worker, job)
    if refused is not None:
        raise ServeError(f"job {job.id} failed: {refused}", "see the server's log")
    return job.to_json()


def _scenario(request: Request, explicit: str | None) -> str:
    name = (
        explicit
        or request.headers.get("x-reef-scenario")
        or request.app.state.config.default_scenario
    )
    check_name("scenario", name)
    return name


def make_router() -> APIRouter:
    router = APIRouter()

    @router.post("/reef/evolve", tags=["evolve"], responses=ERRORS, status_code=202)
    def evolve(
        request: Request, body: EvolveIn, grant: Grant = Depends(grant_of)
    ) -> dict[str, Any]:
        """Queue an evolution job (Reefine for an ask, GEPA on the scenario's tasks.yaml);
        poll `GET /reef/jobs/{id}`."""
        scenario = _scenario(request, body.scenario)
        allow(grant, scenario)
        ask = check_ask(body.ask or "") if plugins.recipe(body.recipe).needs_ask else body.ask
        scenarios.get(scenario)
        options = body.options.model_dump(exclude_none=True)
        return _queue(request, scenario, body.recipe, ask, body.adapter, options)

    @router.post("/reef/quickstart", tags=["evolve"], responses=ERRORS, status_code=202)
    def quickstart(
        request: Request, body: QuickstartIn, grant: Grant = Depends(grant_of)
    ) -> dict[str, Any]:
        """Queue the quickstart flow, `reef quickstart` as a job: the scenario (created
        when new, by a token for every scenario) with the starter tree, pi installed on
        the server's machine, the ask evolved with Reefine, the new release installed;
        poll `GET /reef/jobs/{id}`."""
        allow(grant, body.scenario)
        if grant.scenarios is not None:
            scenarios.get(body.scenario)  # a scenario token never creates one: 404
        ask = check_ask(body.ask)
        return _queue(request, body.scenario, jobs.QUICKSTART_RECIPE, ask, flow="quickstart")

    @router.post("/reef/harness/proposals", tags=["evolve"], responses=ERRORS, status_code=202)
    def propose(
        request: Request, body: ProposalIn, grant: Grant = Depends(grant_of)
    ) -> dict[str, Any]:
        """Propose a change to the served tree (an agent's own edit): refused at once,
        with nothing written, when the tree it makes breaks the tree rules or holds a
        credential; else queued as a job that gates it like any candidate and, when it
        passes, publishes it pending for review (`reef harness promote`, or reject)."""
        scenario = _scenario(request, body.scenario)
        allow(grant, scenario)
        chain = scenarios.get(scenario).chain()
        served = chain.served()
        before = chain.files(served) if served else {}
        after = with_changes(before, body.files)
        if after == before:
            raise ProposalUnchanged(
                f"the served release of {scenario} already is this tree",
                "change a file's text, or name one that exists to remove it",
            )
        gate_files(after).raise_if_blocked()  # a secret or a broken tree: 422, no job
        return _queue(
            request,
            scenario,
            jobs.PROPOSAL_RECIPE,
            body.reason,
            options={"files": body.files},
            flow="proposal",
            publish="review",
        )

    @router.get("/reef/jobs/{job_id}", tags=["evolve"], responses=ERRORS)
    def job(job_id: str, grant: Grant = Depends(grant_of)) -> dict[str, Any]:
        """A job's state, progress and, once done, its outcome (release, verdict, evidence)."""
        found = jobs.get(job_id[:64])
        if not grant.allows(found.scenario):
            raise jobs.missing(found.id)  # as for an unknown id: no existence oracle
        return found.to_json()

    @router.get(
        "/reef/harness/install",
        tags=["releases"],
        responses=ERRORS,
        response_class=PlainTextResponse,
    )
    def install_script(
        request: Request,
        adapter: str = Query(..., max_length=64),
        scenario: str | None = Query(None, max_length=64),
        grant: Grant = Depends(grant_of),
    ) -> PlainTextResponse:
        """A POSIX sh script that installs the wrapper's release on a machine with Reef."""
        name = _scenario(request, scenario)
        allow(grant, name)
        chain = scenarios.get(name).chain()
        served = chain.served()
        requires = parse_files(chain.files(served)).manifest.requires if served else Requires()
        url = str(request.base_url).rstrip("/")
        return PlainTextResponse(
            install_sh(adapter, name, url, served.number if served else None, requires),
            media_type="text/x-shellscript",
        )

    return router


_SAFE_BINARY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
_SAFE_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def install_sh(
    adapter: str,
    scenario: str,
    url: str,
    release: int | None,
    requires: Requires | None = None,
) -> str:
    """The script: check what the release needs, then `reef harness install --from`.

    The agent counts as installed when it is on PATH *or* in Reef's pinned tools
    (``.tools/bin`` beside the ``.venv`` that holds ``reef``), where install.sh puts it."""
    agent = agents.get(adapter)
    binary, wrapper, how = agent.binary, agent.wrapper, f"{agent.label} ({agent.package})"
    q = shlex.quote
    fix_token = "export REEF_TOKEN=... (`reef token` on the server prints it)"
    which = f"r{release}" if release is not None else "the served release"
    lines = [
        "#!/bin/sh",
        f"# Installs {which} of Reef scenario {scenario} for {adapter}, from {url}.",
        f"# Needs Reef's client (reef, {wrapper}) and {binary}; the token in $REEF_TOKEN.",
        "set -eu",
        'fail() { echo "reef install: $1" >&2; exit 1; }',
        "command -v reef >/dev/null 2>&1 ||",
        '  fail "reef is not installed (fix: install Reef\'s client with ./install.sh)"',
        "# Reef's own pinned agents: <repo>/.tools/bin beside <repo>/.venv/bin/reef",
        "REEF_BIN=$(command -v reef)",
        'REEF_BIN=$(readlink -f "$REEF_BIN" 2>/dev/null || echo "$REEF_BIN")',
        'REEF_TOOLS=$(dirname "$REEF_BIN")/../../.tools/bin',
        'agent() { command -v "$1" >/dev/null 2>&1 || [ -x "$REEF_TOOLS/$1" ]; }',
        f"command -v {wrapper} >/dev/null 2>&1 ||",
        f'  fail "{wrapper} is not on PATH (fix: put Reef\'s .venv/bin on PATH)"',
        f"agent {binary} ||",
        f'  fail "{binary} is not installed (fix: install {how}, or run Reef\'s ./install.sh)"',
        f'[ -n "${{REEF_TOKEN:-}}" ] || fail {q("REEF_TOKEN is not set (fix: " + fix_token + ")")}',
    ]
    needs = requires or Requires()
    for name in needs.binaries:
        if _SAFE_BINARY.match(name):
            lines.append(
                f"command -v {q(name)} >/dev/null 2>&1 || "
                f"fail {q(f'{which} needs the program {name} (fix: install {name})')}"
            )
        else:
            lines.append(f"fail {q(f'{which} requires a program named oddly: {name!r}')}")
    for var in needs.env:
        if _SAFE_ENV.match(var):
            lines.append(
                f'[ -n "${{{var}:-}}" ] || '
                f"fail {q(f'{which} needs ${var} set (fix: export {var}=...)')}"
            )
        else:
            lines.append(f"fail {q(f'{which} requires an oddly named variable: {var!r}')}")
    if release is None:
        lines.append(f'fail "scenario {scenario} has no live release yet (fix: publish one)"')
    lines += [
        f"reef harness install --adapter {q(adapter)} --scenario {q(scenario)} "
        f'--from {q(url)} "$@"',
        f'echo "Installed {which}: run {wrapper} with REEF_SCENARIO={scenario}."',
    ]
    return "\n".join(lines) + "\n"


def install(app: FastAPI) -> None:
    app.include_router(make_router())

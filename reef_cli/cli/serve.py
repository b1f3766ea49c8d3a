"""`reef serve`: the recording proxy and the Reef API; `reef serve status|stop` for the
serve of this state dir (the one the agent wrappers start in the background)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from reef_cli.cli._common import JsonOpt, RegistryHelpGroup


def serve(
    ctx: typer.Context,
    host: str | None = typer.Option(None, "--host", help="address to bind [default: 127.0.0.1]"),
    port: int | None = typer.Option(None, "--port", help="port to bind [default: 8901]"),
    upstream: str | None = typer.Option(
        None,
        "--upstream",
        "--inference.upstream-url",
        help="upstream base URL as clients use it, e.g. http://127.0.0.1:11434/v1",
    ),
    upstream_model: str | None = typer.Option(
        None, "--upstream-model", "--inference.upstream-model", help="model name sent upstream"
    ),
    upstream_dialect: str | None = typer.Option(
        None, "--upstream-dialect", help="openai | anthropic [default: from the URL]"
    ),
    upstream_key_env: str | None = typer.Option(
        None, "--upstream-key-env", help="environment variable holding the upstream API key"
    ),
    upstream_responses: bool | None = typer.Option(
        None,
        "--upstream-responses/--no-upstream-responses",
        help="the upstream speaks the OpenAI Responses API: relay /v1/responses as is "
        "[default: only for api.openai.com; else translate it to chat]",
    ),
    config_file: Path | None = typer.Option(
        None, "-c", "--config", help="a YAML file with these settings (flags win)"
    ),
    scenario: str | None = typer.Option(
        None, "--scenario", help="scenario for requests without x-reef-scenario"
    ),
    max_body_mb: int | None = typer.Option(None, "--max-body-mb", help="largest request body"),
    max_answer_mb: int | None = typer.Option(
        None,
        "--max-answer-mb",
        min=1,
        help="largest upstream answer, body or stream; a larger one ends in a 502 [default: 32]",
    ),
    max_record_backlog_mb: int | None = typer.Option(
        None,
        "--max-record-backlog-mb",
        min=1,
        help="MiB of exchanges that may wait for the records store; past it new requests "
        "get a 503 with Retry-After until the store catches up [default: 256]",
    ),
    open_: bool = typer.Option(
        False, "--open", help="require no token (refused unless bound to loopback)"
    ),
    no_record: bool = typer.Option(False, "--no-record", help="relay without recording"),
    access_log: bool = typer.Option(False, "--access-log", help="log every request line"),
    recipe: str | None = typer.Option(
        None,
        "--recipe",
        help="run the live loop with this recipe ({unattended_recipes}; the -c file's `reef:` "
        "keys, else their defaults); a recipe that needs an ask (reefine) starts no loop",
    ),
    idle_exit: float | None = typer.Option(
        None,
        "--idle-exit",
        min=0,
        help="stop after this many seconds with no request, wrapper session or job "
        "(the agent wrappers' background serve sets it) [default: never]",
    ),
    background: bool = typer.Option(
        False, "--background", hidden=True, help="started by a wrapper (serve.json says so)"
    ),
    print_config: bool = typer.Option(
        False,
        "--print-config",
        help="print the settings this command would serve with (flags, the -c file, "
        "`reef config` and defaults merged; passwords as ***) as YAML that -c reads, "
        "and exit without serving",
    ),
) -> None:
    """Run the recording proxy: OpenAI chat, Responses and Anthropic routes, receipts,
    reports, the Reef API."""
    if ctx.invoked_subcommand is not None:
        return  # `reef serve status|stop`
    from reef_cli.cli import serve_process
    from reef_cli.core.config import load_settings
    from reef_cli.server import serve_config
    from reef_cli.server.run import serve as run_server

    settings = load_settings()
    values: dict[str, object] = {
        "host": settings.serve_host,
        "port": settings.serve_port,
        "upstream": settings.upstream,
        "default_scenario": settings.default_scenario,
    }
    if config_file is not None:
        values.update(serve_config.load_file(config_file))
    flags = {
        "host": host,
        "port": port,
        "upstream": upstream,
        "upstream_model": upstream_model,
        "upstream_dialect": upstream_dialect,
        "upstream_key_env": upstream_key_env,
        "upstream_responses": upstream_responses,
        "default_scenario": scenario,
        "max_body_bytes": max_body_mb * 1024 * 1024 if max_body_mb else None,
        "max_answer_bytes": max_answer_mb * 1024 * 1024 if max_answer_mb else None,
        "max_record_backlog_bytes": max_record_backlog_mb * 1024 * 1024
        if max_record_backlog_mb
        else None,
        "open": open_ or None,
        "record": False if no_record else None,
        "access_log": access_log or None,
    }
    values.update({k: v for k, v in flags.items() if v is not None})
    values = serve_config.with_recipe(values, recipe)
    from recipes.engine.worker import Worker  # the CLI is where parts are wired together

    built = serve_config.build(values)
    if print_config:
        import yaml

        typer.echo(yaml.safe_dump(built.shown(), sort_keys=False, allow_unicode=True), nl=False)
        return
    from reef_cli.server.run import bind

    sock = bind(built)  # a busy port is one line, before any banner
    built = built.model_copy(update={"port": sock.getsockname()[1]})  # --port 0: the one taken
    if built.reef is not None:
        loop = built.reef
        typer.echo(
            f"reef serve: live loop on: {loop.recipe}, batch {loop.batch_size}, max staleness "
            f"{loop.max_staleness}, min interval {loop.min_interval_s:g}s, publish "
            f"{loop.publish} (`reef scenario status S` shows it)"
        )
    recorded = serve_process.announce(built.host, built.port, idle_exit, background)
    watcher = serve_process.watch_idle(built.port, idle_exit)
    previous = _exit_cleanly_on_sigterm()
    try:
        from reef_cli.cli._output import echo  # the banner quotes config: spelled out

        run_server(built, announce=echo, jobs=Worker(), sock=sock)
    finally:
        sock.close()
        if watcher is not None:
            watcher.cancel()
        serve_process.retire(recorded)
        if previous is not None:
            import signal

            signal.signal(signal.SIGTERM, previous)


def _exit_cleanly_on_sigterm() -> Any:
    """uvicorn shuts down on SIGTERM, then raises it again with the handler it found: the
    default one would kill the process before ``serve.json`` is forgotten. Make it a clean
    exit (code 0) instead; returns the handler to put back (None: left alone)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    previous = signal.getsignal(signal.SIGTERM)
    if previous is not signal.SIG_DFL:
        return None

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    return previous


app = typer.Typer(
    cls=RegistryHelpGroup,
    help="Run the recording proxy: OpenAI/Anthropic routes, receipts, reports, the Reef API. "
    "`reef serve status` and `reef serve stop` see and stop this state dir's serve.",
    rich_markup_mode=None,
    invoke_without_command=True,
)
app.callback(invoke_without_command=True)(serve)


@app.command("status")
def status(as_json: JsonOpt = False) -> None:
    """Whether this state dir's `reef serve` runs: pid, URL, health, idle limit."""
    from reef_cli.cli import serve_process

    found = serve_process.status()
    if as_json:
        from reef_cli.cli._output import print_json

        print_json(found)
        return
    from reef_cli.cli._output import echo

    if not found["running"]:
        port = f" (last port {found['port']})" if found.get("port") else ""
        echo(f"no reef serve running for {found['state_dir']}{port}")
        return
    idle = found.get("idle_exit")
    health = "healthy" if found["healthy"] else "not answering"
    token = "accepts this state dir's token" if found["accepts_token"] else "rejects the token"
    echo(
        f"reef serve running: pid {found['pid']}, {found['url']}, {health}, {token}; "
        + (f"idle exit after {idle:g}s" if idle else "no idle exit")
        + (f", {found['clients']} agent session(s)" if found["clients"] else "")
        + (" (started by a wrapper)" if found["background"] else "")
    )


@app.command("stop")
def stop() -> None:
    """Stop this state dir's `reef serve`: the one a wrapper started, or one run by hand."""
    from reef_cli.cli import serve_process
    from reef_cli.core import paths

    pid = serve_process.status().get("pid")
    if serve_process.stop():
        typer.echo(f"stopped reef serve (pid {pid})" if pid else "forgot a stale serve.json")
    else:
        from reef_cli.cli._output import echo

        echo(f"no reef serve running for {paths.state_dir()}")

"""`reef serve`: the recording proxy and the Reef API."""

from __future__ import annotations

from pathlib import Path

import typer


def serve(
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
    config_file: Path | None = typer.Option(
        None, "-c", "--config", help="a YAML file with these settings (flags win)"
    ),
    scenario: str | None = typer.Option(
        None, "--scenario", help="scenario for requests without x-reef-scenario"
    ),
    max_body_mb: int | None = typer.Option(None, "--max-body-mb", help="largest request body"),
    open_: bool = typer.Option(
        False, "--open", help="require no token (refused unless bound to loopback)"
    ),
    no_record: bool = typer.Option(False, "--no-record", help="relay without recording"),
    access_log: bool = typer.Option(False, "--access-log", help="log every request line"),
    recipe: str | None = typer.Option(
        None, "--recipe", help="accepted for compatibility with the original Reef (e.g. reefine)"
    ),
) -> None:
    """Run the recording proxy: OpenAI/Anthropic routes, receipts, reports, the Reef API."""
    from reef_cli.core.config import load_settings
    from reef_cli.server import config as serve_config
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
        "default_scenario": scenario,
        "max_body_bytes": max_body_mb * 1024 * 1024 if max_body_mb else None,
        "open": open_ or None,
        "record": False if no_record else None,
        "access_log": access_log or None,
    }
    values.update({k: v for k, v in flags.items() if v is not None})
    run_server(serve_config.build(values), announce=typer.echo)

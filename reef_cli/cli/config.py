"""`reef config …`: show and change settings (config.toml in the state dir, REEF_* env)."""

from __future__ import annotations

from typing import Annotated

import typer

from reef_cli.cli._common import JsonOpt, new_app

app = new_app("Show and change Reef's settings.")


@app.command()
def show(as_json: JsonOpt = False) -> None:
    """Every setting, its value and where the value came from."""
    from reef_cli.cli._output import console, markup, print_json
    from reef_cli.core import config, paths

    rows = config.describe()
    if as_json:
        print_json({"config_file": str(paths.config_path()), "settings": rows})
        return
    from rich.table import Table

    table = Table(title=f"Settings ({markup(paths.config_path())})", title_justify="left")
    for column in ("key", "value", "source", "env var", "description"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            markup(row["key"]),
            markup(repr(row["value"]) if row["value"] is None else row["value"]),
            markup(row["source"]),
            markup(row["env"]),
            markup(row["description"]),
        )
    console().print(table)
    from reef_cli.core.ollama_local import host, local_models

    models = local_models()
    if models:
        console().print(
            markup(
                f"Ollama at {host()} serves: {', '.join(models[:8])} — use one with "
                f"`reef config set model ollama/{models[0]}`"
            )
        )


@app.command("set")
def set_(
    key: Annotated[str, typer.Argument(help="Setting name (see `reef config show`).")],
    value: Annotated[str, typer.Argument(help="New value; validated before it is written.")],
) -> None:
    """Change one setting in config.toml."""
    from reef_cli.cli._output import console, markup
    from reef_cli.core import config

    settings = config.set_setting(key, value)
    console().print(markup(f"{key} = {getattr(settings, key)!r}"))


@app.command()
def unset(key: Annotated[str, typer.Argument(help="Setting name.")]) -> None:
    """Remove a setting from config.toml (back to its default)."""
    from reef_cli.cli._output import console, markup
    from reef_cli.core import config

    config.unset_setting(key)
    console().print(f"{markup(key)} reset to its default")

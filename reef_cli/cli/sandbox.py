"""`reef sandbox`: see what isolation works here, and run a command the way trials run.

Only typer is imported at module level; sandbox and rich load inside the commands so
`reef --help` stays fast.
"""

from __future__ import annotations

import typer

from reef_cli.cli._common import new_app

app = new_app("Inspect and try the bwrap + pasta sandbox that agent trials run in.")


@app.command("check")
def check_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print the checks as JSON."),
) -> None:
    """Show what isolation works on this machine, and how to fix what does not."""
    import sandbox
    from reef_cli.cli._output import console, markup, print_json

    rows = sandbox.check()
    if as_json:
        print_json([r.as_dict() for r in rows])
    else:
        from rich.table import Table

        table = Table(title="reef sandbox check")
        for col in ("check", "ok", "detail", "fix"):
            table.add_column(col, overflow="fold")
        for r in rows:
            mark = "[green]yes[/]" if r.ok else "[red]no[/]"
            table.add_row(markup(r.name), mark, markup(r.detail), markup(r.fix))
        console().print(table)
    if not all(r.ok for r in rows if r.name != "limits"):
        raise typer.Exit(1)


@app.command(
    "run",
    context_settings={"allow_interspersed_args": False},
)
def run_cmd(
    cmd: list[str] = typer.Argument(..., help="The command to run, after --."),
    allow_port: list[int] | None = typer.Option(
        None, "--allow-port", help="A loopback TCP port the command may reach (repeatable)."
    ),
    workdir: str = typer.Option(".", "--workdir", help="The one writable directory."),
    unsandboxed: bool = typer.Option(
        False, "--unsandboxed", help="Run WITHOUT isolation (a copy of the work dir only)."
    ),
    wall: float = typer.Option(600.0, "--wall", help="Wall-clock limit in seconds."),
    memory: int | None = typer.Option(
        None, "--memory", help="Address-space limit in MiB (not for Node: use --node-heap)."
    ),
    node_heap: int | None = typer.Option(
        None, "--node-heap", help="Cap Node's V8 heap (MiB) instead of the address space."
    ),
    ro_bind: list[str] | None = typer.Option(
        None, "--ro-bind", help="Extra host path visible read-only (repeatable)."
    ),
    env: list[str] | None = typer.Option(
        None, "--env", help="NAME=value passed into the sandbox (repeatable)."
    ),
) -> None:
    """Run CMD the way a trial runs: `reef sandbox run --allow-port 8080 -- node agent.js`."""
    import sys

    import sandbox
    from reef_cli.core.errors import SandboxError

    pairs: dict[str, str] = {}
    for item in env or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise SandboxError(f"--env {item!r} is not NAME=value", "write --env NAME=value")
        pairs[name] = value
    if node_heap is not None:
        limits = sandbox.Limits(wall_s=wall, memory_mb=memory, node_heap_mb=node_heap)
    else:
        limits = sandbox.Limits(wall_s=wall, memory_mb=memory if memory is not None else 4096)

    def echo(stream: str, text: str) -> None:
        out = sys.stdout if stream == "stdout" else sys.stderr
        out.write(text)
        out.flush()

    result = sandbox.run(
        cmd,
        workdir,
        allow=[("127.0.0.1", p) for p in allow_port or []],
        ro_binds=ro_bind or [],
        env=pairs,
        limits=limits,
        on_output=echo,
        unsandboxed=unsandboxed,
    )
    from reef_cli.cli._output import echo as say

    if result.killed_by:
        say(f"reef: sandbox: stopped by {result.killed_by}", err=True)
    if result.mode == "none":
        say(f"reef: the unsandboxed copy is at {result.workdir}", err=True)
    raise typer.Exit(result.returncode if 0 <= result.returncode < 256 else 1)

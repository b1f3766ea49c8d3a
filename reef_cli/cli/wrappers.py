"""An agent's wrapper (`reef-pi`, `reef-claude`, `reef-codex`, `reef-opencode`, and any
registered agent's ``wrapper``): run the agent with its inference routed through Reef.

    reef-pi [pi arguments…]          run pi through `reef serve` (started if needed)
    reef-pi evolve "ask" [--wait]    hand an ask to the Reefine recipe
    reef-pi report --score X [--feedback "…"] [--again]   score the last session's answers
    reef-pi versions | install N | doctor

Anything that is not one of these sub-commands is passed to the agent unchanged. The
agent runs against an isolated folder the wrapper owns (``$REEF_HOME/agents/<agent>-<
scenario>``) unless ``--target``/``REEF_AGENT_DIR`` names another, e.g. ``~/.pi/agent``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

if TYPE_CHECKING:
    from reef_cli.core.errors import ReefError

ScenarioOpt = Annotated[str | None, typer.Option("--scenario", "-s", help="Scenario.")]
SUBCOMMANDS = ("evolve", "report", "versions", "install", "doctor", "--help", "-h")


class Wrapper:
    """One agent's wrapper (a row of ``reef_cli.core.agents``)."""

    def __init__(self, adapter: str, prog: str) -> None:
        self.adapter = adapter
        self.prog = prog

    # ------------------------------------------------------------ shared plumbing

    def scenario(self, explicit: str | None = None) -> str:
        from reef_cli.core.config import load_settings

        return explicit or os.environ.get("REEF_SCENARIO") or load_settings().default_scenario

    def target(self, scenario: str) -> Path:
        from reef_cli.core import paths

        chosen = os.environ.get("REEF_AGENT_DIR")
        if chosen:
            return Path(chosen).expanduser()
        return paths.agent_dir(self.adapter, scenario)

    def prepare(self, scenario: str, spec: str | None = None) -> tuple[Path, object, str]:
        """Scenario exists, serve answers, a release is installed; returns target, routing,
        token. Installs the served release when none (or another scenario's) is there."""
        import adapters
        from adapters._install import install_release
        from adapters.base import Routing
        from reef_cli.cli import serve_process
        from reef_cli.core import scenarios, tokens
        from reef_cli.core.publishing import publish_files
        from reef_cli.core.tree import HarnessTree

        found = scenarios.get_or_create(scenario)
        if found.chain().latest() is None:
            publish_files(
                scenario,
                HarnessTree().files(),
                reason="empty starting release",
                source=f"{self.prog}",
            )
        running = serve_process.ensure_running()
        routing = Routing(base_url=running.url, scenario=scenario)
        # The one path by which the token reaches the agent, for every adapter: the
        # variable the agent's config reads (pi's models.json `!printenv`, Claude Code's
        # ANTHROPIC_AUTH_TOKEN from wrapper_env), set here before anything reads it.
        token = tokens.main_token(create=True) or ""
        os.environ[routing.token_env] = token
        target = self.target(scenario)
        record = adapters.get(self.adapter).installed(target)
        if spec is not None or record is None or record.get("scenario") != scenario:
            install_release(self.adapter, scenario, routing, spec or "served", target)
        elif record.get("base_url") != routing.base_url:
            # The serve moved to another port: same release, routed to where it is now.
            # allow_pending: it is the release the person already chose to install.
            install_release(
                self.adapter,
                scenario,
                routing,
                str(record["release"]),
                target,
                allow_pending=True,
            )
        return target, routing, token

    # ------------------------------------------------------------ running the agent

    def run_agent(self, argv: list[str]) -> None:
        import adapters
        from reef_cli.cli import serve_process
        from reef_cli.core import paths

        scenario = self.scenario()
        target, routing, _ = self.prepare(scenario)  # puts the token in os.environ
        adapter = adapters.get(self.adapter)
        command, extra = adapter.wrapper(target, routing, argv)  # type: ignore[arg-type]
        line = adapter.notice(target)
        if line:  # it quotes the chain (a release's reason): control characters spelled out
            from reef_cli.cli._output import safe

            print(safe(line), file=sys.stderr)
        env = {**os.environ, **extra}
        # The agent keeps this pid after exec: the background serve stays up while it runs.
        serve_process.register_client(os.getpid())
        os.umask(paths.person_umask())  # the agent writes the person's own project files
        os.execvpe(command[0], command, env)

    # ------------------------------------------------------------ sub-commands

    def app(self) -> typer.Typer:
        app = typer.Typer(
            name=self.prog,
            no_args_is_help=False,
            rich_markup_mode=None,
            add_completion=False,
            help=f"Run the agent through Reef; sub-commands manage its releases. Anything else "
            f"is passed to the agent: `{self.prog} -p 'hi'`.",
        )

        @app.command()
        def versions(scenario: ScenarioOpt = None) -> None:
            """List the scenario's releases and what is installed."""
            from reef_cli.cli.main import app as reef

            name = self.scenario(scenario)
            code = reef(
                ["harness", "versions", "-s", name], prog_name="reef", standalone_mode=False
            )
            if code:  # the error line is already printed
                raise typer.Exit(code)
            import adapters
            from reef_cli.cli._output import echo

            record = adapters.get(self.adapter).installed(self.target(name))
            if record:
                echo(f"installed for {self.prog}: r{record.get('release')}")

        @app.command()
        def install(
            release: Annotated[str, typer.Argument(help="Release: 3, r3, latest, served.")],
            scenario: ScenarioOpt = None,
        ) -> None:
            """Install (pin) a release for the agent."""
            from reef_cli.cli._output import echo

            name = self.scenario(scenario)
            target, _, _ = self.prepare(name, release)
            echo(f"installed {release} of {name} into {target}")

        @app.command()
        def report(
            score: Annotated[
                str | None, typer.Option("--score", help="A finite number, e.g. 0.8.")
            ] = None,
            feedback: Annotated[str | None, typer.Option("--feedback", help="Text.")] = None,
            again: Annotated[
                bool,
                typer.Option(
                    "--again",
                    help="Store another report on the same receipts (by default a report "
                    "on the same session and receipts is stored once).",
                ),
            ] = False,
            scenario: ScenarioOpt = None,
        ) -> None:
            """Score the receipts of the agent's last session (once, unless --again)."""
            from reef_cli.cli._output import echo
            from reef_cli.cli._wrapper_ops import parse_score, report_last_session

            value = parse_score(score)
            name = self.scenario(scenario)
            stored = report_last_session(
                self.adapter, name, self.target(name), value, feedback, again=again
            )
            count = len(stored["references"])
            if stored.get("created", True):
                echo(f"report {stored['id']} stored for {count} receipt(s)")
            else:
                echo(
                    f"report {stored['id']} already stored for {count} receipt(s); "
                    "nothing added (--again adds another)"
                )

        @app.command()
        def evolve(
            ask: Annotated[
                str | None, typer.Argument(help="What should change, in a sentence.")
            ] = None,
            scenario: ScenarioOpt = None,
            filed: Annotated[
                bool,
                typer.Option(
                    "--filed",
                    help="Send the asks this agent's /evolve filed for the scenario, oldest "
                    "first, instead of ASK.",
                ),
            ] = False,
            wait: Annotated[bool, typer.Option("--wait", help="Wait for the release.")] = False,
            yes: Annotated[
                bool, typer.Option("--yes", "-y", help="Ask no clarifying questions.")
            ] = False,
        ) -> None:
            """Hand an ask to the Reefine recipe: it runs in `reef serve` and trials the
            change on this wrapper's agent."""
            from reef_cli.cli._wrapper_ops import submit_evolve, submit_filed
            from reef_cli.core.asks import check_ask, clarified
            from reef_cli.core.errors import ReefError

            if filed == (ask is not None):
                raise ReefError(
                    "give an ask, or --filed for the asks /evolve filed (not both)",
                    f'{self.prog} evolve "always run the tests first", or '
                    f"{self.prog} evolve --filed",
                )
            if ask is None:
                submit_filed(self.adapter, self.scenario(scenario), wait)
                return
            if yes or not sys.stdin.isatty():
                ask = check_ask(ask)  # refused here, before a serve starts
            else:
                ask = clarified(ask, lambda q: str(typer.prompt(q, default="", show_default=False)))
            submit_evolve(self.adapter, self.scenario(scenario), ask, wait)

        @app.command()
        def doctor() -> None:
            """Check the agent binary and Reef's requirements."""
            from reef_cli.cli.doctor import doctor as reef_doctor

            reef_doctor(as_json=False)

        return app

    def main(self) -> None:
        from reef_cli.core.errors import ReefError

        args = sys.argv[1:]
        try:
            if args and args[0] in SUBCOMMANDS:
                import typer.main

                command = typer.main.get_command(self.app())
                command.main(args=args, prog_name=self.prog)
            else:
                self.run_agent(args)
        except ReefError as exc:
            _fail(exc)


def run_agent(name: str) -> None:
    """Run the wrapper of the agent called ``name`` (a row of ``reef_cli.core.agents``):
    what a console script of Reef's, or of a plugin's, calls."""
    from reef_cli.core import agents
    from reef_cli.core.errors import ReefError

    try:
        agent = agents.get(name)
    except ReefError as exc:
        _fail(exc)
    Wrapper(agent.name, agent.wrapper).main()


def run() -> None:
    """The console script every agent's wrapper can point at: the agent is the one whose
    ``wrapper`` is this script's name (``reef-pi`` -> pi). A plugin's agent names it in its
    own package: ``reef-mine = "reef_cli.cli.wrappers:run"`` beside ``wrapper="reef-mine"``."""
    from reef_cli.core import agents
    from reef_cli.core.errors import OptionInvalid

    script = Path(sys.argv[0]).name.removesuffix(".exe").removesuffix("-script.py")
    for agent in agents.registered():
        if agent.wrapper == script:
            Wrapper(agent.name, agent.wrapper).main()
            return
    wrappers = ", ".join(agent.wrapper for agent in agents.registered())
    _fail(
        OptionInvalid(
            f"no registered agent has the wrapper {script!r}",
            f"run one of: {wrappers}" if wrappers else "reinstall Reef (./install.sh)",
        )
    )


def _fail(exc: ReefError) -> NoReturn:
    from reef_cli.cli._output import error_line

    error_line(exc.one_line())
    sys.exit(exc.exit_code)

"""The agents Reef adapts: one row each, read from the ``reef.adapters`` entry points.

Everything that lists or validates agents reads this table — the adapter lookup
(``adapters.get``), the server's ``adapter`` parameters, the install scripts, the
wrappers, doctor, the CLI's help — so a new agent is its package plus one row, registered
the way Reef registers its own in pyproject.toml::

    [project.entry-points."reef.adapters"]
    mine = "my_package:AGENT"      # an Agent named "mine", in a light module

``core`` cannot import ``adapters``: the row names the adapter class by module and
attribute, and ``adapters.get`` imports it. The table is read once per process
(``plugins.forget`` reads it again).
"""

from __future__ import annotations

from dataclasses import dataclass

from reef_cli.core import plugins
from reef_cli.core.errors import OptionInvalid


@dataclass(frozen=True)
class Agent:
    name: str  # the adapter name: --adapter, ?adapter=, the install ledger
    binary: str  # the executable (Reef's pinned copy in .tools/bin, else PATH)
    wrapper: str  # the console script that runs it through `reef serve`
    label: str  # how a person calls it
    package: str  # where a person gets it
    module: str  # the adapter class, imported by adapters.get
    attribute: str
    aliases: tuple[str, ...] = ()
    hook: str | None = None  # the module whose main(argv) `reef hook NAME …` runs, if any
    install: str = ""  # how to get the copy Reef supports (doctor's fix); "" = ``package``
    tools: tuple[str, ...] = ()  # more executables of the agent doctor checks (``pi-0.73``)
    #: what in a folder tells it is this agent's (``sessions/``: a folder), most telling
    #: first: `reef sessions harvest --target DIR` without ``--adapter``
    marks: tuple[str, ...] = ()

    @property
    def factory(self) -> str:
        """``module:attribute`` of the adapter class (``plugins.load``)."""
        return f"{self.module}:{self.attribute}"


def registered() -> tuple[Agent, ...]:
    """Every registered agent: Reef's own first, each by name."""
    return plugins.rows(plugins.ADAPTERS_GROUP, Agent)


def names() -> tuple[str, ...]:
    return tuple(agent.name for agent in registered())


def names_text(sep: str = ", ", last: str = " or ") -> str:
    """``claude-code, codex, opencode or pi`` for help texts and error messages."""
    found = names()
    if len(found) < 2:
        return "".join(found) or "(none registered: reinstall Reef)"
    return sep.join(found[:-1]) + last + found[-1]


def find(name: str) -> Agent | None:
    for agent in registered():
        if name == agent.name or name in agent.aliases:
            return agent
    return None


def get(name: str) -> Agent:
    """The agent called ``name`` (or an alias); a clear error naming the registered ones
    for anything else."""
    agent = find(name)
    if agent is None:
        raise OptionInvalid(f"unknown adapter {name!r}", plugins.unknown_fix(names()))
    return agent

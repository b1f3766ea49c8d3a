"""The pi adapter: Reef releases in pi's agent dir, pi routed through `reef serve`.

This module is the agent's row only (read from the ``reef.adapters`` entry point, so it
stays light); the adapter is ``adapters.pi.adapter.PiAdapter``. See docs/adapters-pi.md.
"""

from __future__ import annotations

from reef_cli.core.agents import Agent

AGENT = Agent(
    name="pi",
    binary="pi",
    wrapper="reef-pi",
    label="pi",
    package="npm install -g @earendil-works/pi-coding-agent",
    module="adapters.pi.adapter",
    attribute="PiAdapter",
    install="scripts/install_agents.sh (pi 1.6 and pi-0.73 in .tools/bin)",
    tools=("pi-0.73",),
    marks=("sessions/",),
)

"""Quickstart: the main job as one flow, so `reef quickstart` and `POST /reef/quickstart`
take the same steps.

1. the scenario (created when new) with the starter tree as its first release, installed
   for pi in an isolated folder (``paths.agent_dir``), routed to this machine's
   `reef serve`;
2. one ask evolved with Reefine into a gated release (``evolve``: the CLI passes its
   progress bar, the job worker its job's progress);
3. the new release installed for pi — unless it holds extension code and waits for a
   person's review (``pending``), or nothing was published.

The caller shows the steps (``say(step, line)``) and the diff (``Quickstart.diff``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from recipes.engine.gate import Outcome
from reef_cli.core import jobs, paths, scenarios
from reef_cli.core.diff import FileDiff, diff_trees
from reef_cli.core.publishing import publish_files
from reef_cli.core.scenarios import Scenario
from reef_cli.core.tree import starter_tree

AGENT = "pi"
RECIPE = jobs.QUICKSTART_RECIPE


@dataclass
class Quickstart:
    scenario: Scenario
    installed: int  # the release installed before the ask
    where: str  # the agent's isolated folder
    outcome: Outcome
    after: int | None = None  # the release installed after it (None: none was)

    def diff(self) -> tuple[list[FileDiff], str, str] | None:
        """What the ask changed: the diff from the release installed first to the new one,
        with both tags; None when nothing was published."""
        if self.outcome.release is None or self.outcome.state not in ("published", "pending"):
            return None
        chain = self.scenario.chain()
        old, new = chain.get(self.installed), chain.get(self.outcome.release)
        return diff_trees(chain.files(old), chain.files(new), old.tag, new.tag), old.tag, new.tag

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario.name,
            "agent": AGENT,
            "installed": self.installed,
            "where": self.where,
            "after": self.after,
        }


def run(
    scenario_name: str,
    ask: str,
    *,
    evolve: Callable[[Scenario], Outcome],
    say: Callable[[int, str], None] = lambda step, line: None,
) -> Quickstart:
    """Take the three steps; ``evolve`` runs step 2 (Reefine on ``ask``) for the scenario."""
    from adapters._install import install_release
    from adapters.base import Routing
    from reef_cli.core.config import load_settings

    scenario = scenarios.get_or_create(scenario_name)
    if scenario.chain().latest() is None:
        publish_files(
            scenario_name, starter_tree().files(), reason="starter tree (reef quickstart)"
        )
    settings = load_settings()
    target = paths.agent_dir(AGENT, scenario_name)
    routing = Routing(f"http://{settings.serve_host}:{settings.serve_port}", scenario_name)
    installed, where = install_release(AGENT, scenario_name, routing, "served", target)
    say(1, f"scenario {scenario_name}: r{installed.number} installed for {AGENT} in {where}")
    say(2, f"reef-{AGENT} evolve {ask!r}")
    done = Quickstart(scenario, installed.number, str(where), evolve(scenario))
    outcome = done.outcome
    if outcome.state == "published" and outcome.release is not None:
        install_release(AGENT, scenario_name, routing, "latest", target)
        done.after = outcome.release
        say(3, f"installed r{outcome.release} for {AGENT}")
    elif outcome.state == "pending":  # extension code: a person reviews it before it installs
        say(
            3,
            f"r{outcome.release} is pending review (it holds extension code): read it "
            f"with `reef harness show {outcome.release} -s {scenario_name}`, then "
            f"`reef harness promote {outcome.release} -s {scenario_name}`",
        )
    return done

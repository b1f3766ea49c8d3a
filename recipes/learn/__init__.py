"""`reef bench learn`: does Reef learn what a user wants, live, and does it hold on
prompts the learner never saw?

In a fresh state dir (the embedded models linked in): a scenario named after the persona
whose r1 is Reef's starter tree (the harness `reef harness init` gives a person: general
working rules about nothing any persona checks), a real `reef serve` on the embedded model
with the live loop on (``recipe``, ``batch_size`` sessions a run, no minimum interval,
publish auto), and the simulated user (``live``) sending the train prompts one session
each, reporting each reply. When a report fills a batch the loop runs the recipe in its
worker; the user waits for the run and the next request gets whatever it published, with
no restart. Then the server stops and ``heldout`` answers the held-out prompts with each
arm. Every number goes in the result, whatever its sign.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from recipes.learn import heldout
from recipes.learn.live import LiveServer, SimulatedUser
from recipes.personas import Persona, split
from reef_cli.core.errors import OptionInvalid

DEFAULT_RECIPE = "skillclaw"  # the recipe that learns from reports' text (docs/skillclaw.md)
RECIPES = ("skillclaw",)
ADAPTED_RUN = 3  # sessions to adaptation: the first of this many accepted in a row

# (phase, done, total, detail): phase is "sessions" or "evaluation"
Progress = Callable[[str, int, int, str], None]


@dataclass(frozen=True)
class LearnOptions:
    persona: Persona
    recipe: str = DEFAULT_RECIPE
    sessions: int | None = None  # default: every train prompt of the persona
    batch_size: int = 5  # the sign test's minimum: a held-back run retries each session
    home: Path | None = None  # default: a fresh temporary state dir, removed afterwards
    plot: Path | None = None
    command: str = ""


def sessions_to_adaptation(curve: list[int], run: int = ADAPTED_RUN) -> int | None:
    """The 1-based session that begins the first ``run`` accepted sessions in a row."""
    for start in range(len(curve) - run + 1):
        if all(curve[start : start + run]):
            return start + 1
    return None


@contextlib.contextmanager
def _state_dir(home: Path) -> Iterator[dict[str, str]]:
    """This process and the server it starts use ``home`` (and the model the person
    configured, else the embedded one)."""
    saved = os.environ.get("REEF_HOME")
    os.environ["REEF_HOME"] = str(home)
    try:
        yield dict(os.environ)
    finally:
        if saved is None:
            os.environ.pop("REEF_HOME", None)
        else:
            os.environ["REEF_HOME"] = saved


def _link_models(home: Path, source: Path) -> None:
    """The person's embedded models, linked into the fresh state dir (no second copy)."""
    if source.exists() and not (home / "models").exists():
        (home / "models").symlink_to(source, target_is_directory=True)


def _commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def check_options(options: LearnOptions) -> None:
    if options.recipe not in RECIPES:
        raise OptionInvalid(
            f"reef bench learn runs {', '.join(RECIPES)}, not {options.recipe!r}",
            f"--recipe {DEFAULT_RECIPE}",
        )
    if options.sessions is not None and options.sessions > options.persona.prompts.train:
        raise OptionInvalid(
            f"--sessions {options.sessions} is more than the persona's "
            f"{options.persona.prompts.train} train prompts",
            "raise prompts.train in the persona, or ask for fewer sessions",
        )


def run(options: LearnOptions, progress: Progress | None = None) -> dict[str, Any]:
    """The whole measurement; returns every number (``--json``)."""
    from reef_cli.core.embedded import models_dir
    from reef_cli.core.llm import describe_model

    check_options(options)
    say = progress or (lambda *_: None)
    persona = options.persona
    prompts = split(persona)
    train = prompts.train[: options.sessions or len(prompts.train)]
    source = models_dir()
    home = options.home or Path(tempfile.mkdtemp(prefix=f"reef-learn-{persona.name}-"))
    home.mkdir(parents=True, exist_ok=True)
    _link_models(home, source)
    began = time.monotonic()
    result: dict[str, Any] = {
        "persona": persona.name,
        "recipe": options.recipe,
        "command": options.command,
        "commit": _commit(),
        "batch_size": options.batch_size,
        "state_dir": str(home) if options.home else None,
    }
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm) if main else None
    try:
        with _state_dir(home) as env:
            result["model"] = describe_model()
            before = _start_scenario(persona.name)
            live = _live(options, persona, train, env, home, say)
            result.update(live)
            scored_at = time.monotonic()
            result["seconds"] = {"sessions": round(scored_at - began, 1)}
            after = _served_files(persona.name)
            result.update(_evaluate(persona, prompts.heldout, before, after, live, say))
            result["seconds"]["evaluation"] = round(time.monotonic() - scored_at, 1)
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
        if options.home is None:
            shutil.rmtree(home, ignore_errors=True)
    result["seconds"]["total"] = round(time.monotonic() - began, 1)
    if options.plot is not None:
        from reef_cli.core.plots import learn_plot

        result["plot"] = str(learn_plot(result, options.plot))
    return result


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM unwinds like Ctrl-C: the server is stopped and the state dir cleaned."""
    raise SystemExit(128 + signum)


def start_tree() -> dict[str, str]:
    """What the user starts from: Reef's starter tree. Not an empty one — with no system
    prompt at all the 1.5B model writes markdown, and *any* rule text makes it write plain
    sentences (the first plain-prose run: a placebo rule gained +0.64 of the +0.71), so an
    empty start would credit the recipe with what merely having rules does."""
    from reef_cli.core.tree import starter_tree

    return dict(starter_tree().files())


def _start_scenario(name: str) -> dict[str, str]:
    from reef_cli.core import scenarios
    from reef_cli.core.publishing import publish_files

    scenarios.create(name)
    files = start_tree()
    publish_files(name, files, reason="the starter tree the user begins with")
    return files


def _served_files(name: str) -> dict[str, str]:
    from reef_cli.core import scenarios

    chain = scenarios.get(name).chain()
    served = chain.served()
    return dict(chain.files(served)) if served is not None else start_tree()


def _live(
    options: LearnOptions,
    persona: Persona,
    train: list[Any],
    env: dict[str, str],
    home: Path,
    say: Progress,
) -> dict[str, Any]:
    loop = {
        "recipe": options.recipe,
        "batch_size": options.batch_size,
        "min_interval_s": 0,
        "poll_s": 0.5,
        "publish": "auto",
        "scenarios": [persona.name],
    }
    server = LiveServer(home, persona.name, loop, env).start()
    user = SimulatedUser(persona, server.url, persona.name)
    sessions = []
    runs: list[dict[str, Any]] = []
    releases: list[dict[str, Any]] = []
    try:
        for index, prompt in enumerate(train, 1):
            say("sessions", index - 1, len(train), f"session {index}")
            sessions.append(user.session(index, prompt))
            last = user.settle(index)
            if last is not None and (not runs or runs[-1]["job"] != last.get("job")):
                runs.append({**last, "after_session": index})
                if last.get("release") and last.get("state") == "published":
                    releases.append(
                        {"number": last["release"], "after_session": index, "job": last["job"]}
                    )
        say("sessions", len(train), len(train), "done")
    finally:
        user.close()
        server.stop()
    curve = [int(s.accepted) for s in sessions]
    return {
        "sessions": len(sessions),
        "accept_curve": curve,
        "sessions_to_adaptation": sessions_to_adaptation(curve),
        "releases": releases,
        "runs": runs,
        "session_log": [asdict(s) for s in sessions],
        "complaints": list(dict.fromkeys(s.complaint for s in sessions if s.complaint)),
    }


def _evaluate(
    persona: Persona,
    prompts: list[Any],
    before: dict[str, str],
    after: dict[str, str],
    live: dict[str, Any],
    say: Progress,
) -> dict[str, Any]:
    from reef_cli.core.llm import ModelClient

    added = heldout.added_length(before, after)
    raw = "\n".join(f"- {c}" for c in live["complaints"]) or "(no complaints were sent)"
    arms = {
        "before": before,
        "after": after,
        "aa": before,
        "placebo": heldout.with_rule(
            before, heldout.PLACEBO_PATH, heldout.placebo(added or len(raw))
        ),
        "raw_feedback": heldout.with_rule(before, heldout.ADDED_PATH, raw),
        "oracle": heldout.with_rule(before, heldout.ADDED_PATH, persona.oracle_rule()),
    }
    model = ModelClient(timeout=600.0)  # the server's model: configured, else embedded
    # The A/A arm asks the model again, never the answer cache: it is the control that
    # shows the same tree gives the same answers (and so that cached answers are sound).
    fresh = ModelClient(timeout=600.0, cache=False)
    total = len(arms) * len(prompts)
    done = 0
    answers: dict[str, list[heldout.Answer]] = {}
    for name, files in arms.items():

        def tick(arm: str = name) -> None:
            nonlocal done
            done += 1
            say("evaluation", done, total, arm)

        client = fresh if name == "aa" else model
        answers[name] = heldout.answer_all(client, persona, files, prompts, tick)
    base = answers["before"]

    def versus(arm: str) -> dict[str, Any]:
        return {m: heldout.compare(base, answers[arm], m) for m in ("strict", "lenient")}

    summary = {
        name: {
            "strict": round(sum(a.strict for a in got) / len(got), 4),
            "lenient": round(sum(a.lenient for a in got) / len(got), 4),
            "words": round(sum(a.words for a in got) / len(got), 1),
        }
        for name, got in answers.items()
    }
    return {
        "heldout": {"prompts": len(prompts), **versus("after")},
        "controls": {arm: versus(arm) for arm in ("aa", "placebo", "raw_feedback", "oracle")},
        "arms": summary,
        "after_rules": {p: t for p, t in after.items() if p.startswith("rules/")},
        "placebo_chars": added,
    }

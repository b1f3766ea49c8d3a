"""The live loop: `reef serve` runs a recipe in the background once a scenario has
``batch_size`` eligible scored sessions (docs/live-loop.md).

A daemon thread, started and stopped with the app, wakes every ``poll_s`` and checks
each learning scenario: it settles the run it started last (the job's end), counts the
evidence (``core.evidence``, the same numbers the recipe reads) and, when the batch is
full, ``min_interval_s`` has passed and no job of the scenario is queued or running,
creates a job and hands it to the ``JobRunner`` — the server itself runs no recipe. None
of it is on the request path: the proxy never waits for the loop, and a release the job
publishes is served to the next request because the proxy checks the chain ref per
request. What each check found is in ``scenarios/<S>/learning.json``.

A failing check or job never stops the loop: it is logged by class name only (a message
may quote a person's session), and the next poll tries again.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from reef_cli.core import evidence, jobs, plugins, scenarios
from reef_cli.core import learning_state as ls
from reef_cli.core.errors import ReefError, ScenarioNotFound
from reef_cli.core.jobs import JobRunner
from reef_cli.core.records import now_iso
from reef_cli.core.store import Store
from reef_cli.server.periodic import Periodic
from reef_cli.server.serve_config import LearningConfig

log = logging.getLogger("reef.learning")

# After these ends the batch was looked at, so the loop advances the recipe's mark over
# it; failed / invalid / stopped: the same batch is tried again once a session is new or
# has grown, or RETRY_S after the end (and after min_interval_s).
CONSUMED = ("published", "pending", "rejected", "unchanged")
RETRIED = ("failed", "invalid", "stopped")
# An end that repeats would repeat in a second: the answers it was judged on are reused
# (core/answer_cache.py), so without this wait the loop would start a run a second.
RETRY_S = 60.0
# A scenario this small is recounted whenever it changes, even when it cannot trigger yet
# (its numbers on the status route stay exact); a larger one only once it could trigger.
SMALL_SCENARIO = 1000
# A full count may take at most 1/DUTY of the loop's time: the count is Python that shares
# the serving process's GIL (0.1 ms a record), so a huge scenario is counted less often.
DUTY = 20
HEARTBEAT_S = 30.0  # learning.json is rewritten at least this often (checked_at)


class TrainRefused(ReefError):
    """A run asked for now (POST /reef/train) cannot start: the line says why."""

    http_status = 409


@dataclass
class _Seen:
    """What the last check of a scenario saw, in memory (a restart recounts)."""

    probe: list[Any]
    ready: list[evidence.SessionEvidence]
    counted_at: float  # monotonic
    took: float  # seconds the full count took


class LiveLoop(Periodic):
    """One thread for every learning scenario; one job per scenario at a time."""

    name = "reef-live-loop"

    def __init__(self, config: LearningConfig, store: Store, runner: JobRunner) -> None:
        super().__init__(config.poll_s, store)
        self.config = config
        self.store: Store = store
        self.runner = runner
        self._seen: dict[str, _Seen] = {}
        self._served: dict[str, tuple[Any, int | None]] = {}
        self._saved: dict[str, tuple[dict[str, Any], float]] = {}
        # runs asked for now (POST /reef/train), answered by the loop's own thread, so
        # only that thread ever touches the counts above
        self._asked: dict[str, Future[str]] = {}
        self._asked_lock = threading.Lock()
        self._started_job: str | None = None  # the job the current check started
        self.checks = 0  # completed polls (tests wait on it, never on time)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        super().start()
        log.info(
            "live loop on: recipe %s, batch %d, every %gs",
            self.config.recipe,
            self.config.batch_size,
            self.config.poll_s,
        )

    def run_once(self) -> None:
        self.tick()

    def train(self, name: str) -> Future[str]:
        """Ask for a run of ``name`` now, on the eligible sessions it has, whatever
        ``batch_size``, ``min_interval_s`` or a manual training mode say. The loop's thread
        answers at once: the future holds the job's id, or TrainRefused (a job of the
        scenario is running, nothing is eligible, no task set for a recipe that needs
        one, another replica is starting a run)."""
        with self._asked_lock:
            future = self._asked.get(name)
            if future is None:
                future = self._asked[name] = Future()
        self.wake()
        return future

    def _take_ask(self, name: str) -> Future[str] | None:
        with self._asked_lock:
            return self._asked.pop(name, None)

    def covers(self, scenario: str) -> bool:
        """Whether this loop learns for ``scenario`` (listed, or any with traffic)."""
        return self.config.scenarios is None or scenario in self.config.scenarios

    # ------------------------------------------------------------ one poll

    def tick(self) -> None:
        try:
            names = self._targets()
        except Exception as exc:  # the store is busy or gone: the next poll tries again
            log.warning("live loop: cannot list scenarios (%s)", type(exc).__name__)
            names = []
        for name in names:
            if self._stop.is_set():
                break
            try:
                self.check(name)
            except ScenarioNotFound:
                continue  # listed in the config, not created yet
            except Exception as exc:  # one scenario's trouble never stops the others
                log.warning("live loop: checking %s failed (%s)", name, type(exc).__name__)
                self._note_error(name, exc)
        self.checks += 1

    def _targets(self) -> list[str]:
        names = (
            list(self.config.scenarios)
            if self.config.scenarios is not None
            else ls.traffic_scenarios(self.store)
        )
        with self._asked_lock:
            asked = [name for name in self._asked if name not in names]
        return names + asked

    def _note_error(self, name: str, exc: Exception) -> None:
        self._saved.pop(name, None)  # the file now differs from what was last written
        try:
            scenario = scenarios.get(name)
            state = ls.load(scenario.path) or ls.LearningState(name)
            state.last_error = type(exc).__name__
            state.checked_at = now_iso()
            ls.save(scenario.path, state)
        except Exception:  # the state dir itself is the trouble: the log line says enough
            pass

    def check(self, name: str) -> ls.LearningState:
        """Settle the last run, count, decide; write ``learning.json``. Returns the state.
        A run asked for (``train``) is started, or refused with why, in this check."""
        asked = self._take_ask(name)
        self._started_job = None
        try:
            state = self._check(name, asked is not None)
        except BaseException as exc:
            if asked is not None:
                asked.set_exception(exc)
            raise
        if asked is not None:
            if self._started_job is not None:
                asked.set_result(self._started_job)
            else:
                detail = (state.next_trigger or {}).get("detail") or "the loop started no run"
                asked.set_exception(
                    TrainRefused(
                        f"no run started for {name}: {detail}",
                        f"`reef scenario status {name}` shows the live loop's counts",
                    )
                )
        return state

    def _check(self, name: str, asked: bool) -> ls.LearningState:
        cfg = self.config
        scenario = scenarios.get(name)
        state = ls.load(scenario.path) or ls.LearningState(name)
        state.recipe = cfg.recipe
        state.config = cfg.model_dump()
        state.last_error = None
        now = datetime.now(UTC)
        run = state.last_run
        if run is not None and run.state in jobs.ACTIVE:
            self._settle(scenario, run)
        seen, current = self._count(scenario, state, force=asked)
        eligible = len(seen.ready) if seen is not None else 0
        run = state.last_run
        started = ls.parse_time(run.started) if run else None
        due = started + timedelta(seconds=cfg.min_interval_s) if started else None
        if run is not None and run.state in jobs.ACTIVE:
            state.next_trigger = _waits("job", f"job {run.job} is {run.state}", job=run.job)
        elif (
            plugins.recipe(cfg.recipe).needs_tasks and not (scenario.path / ls.TASKS_FILE).exists()
        ):
            state.next_trigger = _waits(
                "tasks",
                f"{cfg.recipe} searches a task set: add scenarios/{name}/{ls.TASKS_FILE} "
                "(`reef tasks make … -o` writes one)",
            )
        elif asked:
            if eligible == 0:
                state.next_trigger = _waits(
                    "sessions", "no eligible scored session yet (report on some answers)"
                )
            else:
                self._trigger_once(scenario, state, seen, origin="train")
        elif scenario.training_mode == "manual":
            state.next_trigger = _waits(
                "train",
                f"training_mode is manual: POST /reef/train starts a run ({eligible} eligible "
                "scored session(s))",
            )
        elif (retry := _retry_due(run, seen, now)) is not None:
            state.next_trigger = _waits(
                "retry",
                f"the last run ended {run.state if run else ''} on this same batch; it is "
                f"tried again at {ls.iso(retry)}, or sooner when a session is new or grows",
                at=ls.iso(retry),
            )
        elif _held_back(run, seen):
            state.next_trigger = _waits(
                "sessions",
                f"the last run held its batch back ({run.message[:160] if run else ''}); "
                "a new or grown session starts the next",
                needed=1,
            )
        elif eligible < cfg.batch_size:
            needed = cfg.batch_size - eligible
            state.next_trigger = _waits(
                "sessions",
                f"{needed} more eligible scored session(s) ({eligible} of {cfg.batch_size})",
                needed=needed,
            )
        elif not current:
            state.next_trigger = _waits(
                "count", "the evidence changed since the last count; recounting shortly"
            )
        elif due is not None and due > now:
            state.next_trigger = _waits(
                "interval", f"min_interval_s: not before {ls.iso(due)}", at=ls.iso(due)
            )
        else:
            self._trigger_once(scenario, state, seen)
        self._save(scenario, state)
        return state

    def _trigger_once(
        self,
        scenario: scenarios.Scenario,
        state: ls.LearningState,
        seen: _Seen | None,
        origin: str = "live-loop",
    ) -> None:
        """Start a run unless another replica on this store is starting one or runs one:
        the decision is made holding the scenario's lock (a PostgreSQL advisory lock
        between replicas, a file lock between processes on one state dir), and rechecked
        under it — the active jobs and the evidence — since another replica may have
        started and finished a run since this one counted."""
        name = scenario.name
        with self.store.exclusive(f"live-loop:{name}") as held:
            if not held:
                state.next_trigger = _waits(
                    "replica", "another replica is starting this scenario's run"
                )
            elif other := next(iter(jobs.active(name)), None):
                state.next_trigger = _waits(
                    "job", f"job {other.id} of this scenario is {other.state}", job=other.id
                )
            elif (
                seen is None
                or ls.probe(self.store, name, scenario.path, self.config.recipe) != seen.probe
            ):
                state.next_trigger = _waits(
                    "count", "the evidence changed since the last count; recounting shortly"
                )
            else:
                self._trigger(scenario, state, seen.ready, origin)

    def _save(self, scenario: scenarios.Scenario, state: ls.LearningState) -> None:
        """Write ``learning.json`` when what it says changed, else at most every
        ``HEARTBEAT_S`` (``checked_at``): the atomic write's fsync is the most a poll
        costs, so an idle poll skips it."""
        body = state.to_json()
        body.pop("checked_at", None)
        last = self._saved.get(scenario.name)
        clock = time.monotonic()
        if last is not None and last[0] == body and clock - last[1] < HEARTBEAT_S:
            return
        state.checked_at = now_iso()
        ls.save(scenario.path, state)
        self._saved[scenario.name] = (body, clock)

    # ------------------------------------------------------------ parts

    def _settle(self, scenario: scenarios.Scenario, run: ls.LastRun) -> None:
        """Copy a finished job's end into the run; advance the mark over its batch when
        the recipe does not read sessions itself (gepa: else the batch retriggers it)."""
        try:
            job = jobs.get(run.job)
        except jobs.JobNotFound:
            run.state, run.ended = "failed", now_iso()
            run.message = "the job's file is gone; the next batch starts a new one"
            return
        if job.state in jobs.ACTIVE:
            run.state = job.state
            return
        run.state, run.ended, run.release = job.state, job.updated_at, job.release
        run.message = job.message[:500]
        log.info(
            "live loop: %s run %s ended %s%s",
            scenario.name,
            job.id,
            job.state,
            f" (r{job.release})" if job.release else "",
        )
        # A recipe that reads the sessions itself keeps its own mark (SkillClaw's
        # ``settle`` advances it over what it consumed and holds back sessions still
        # waiting on a judge): the loop never writes it, or it would consume those.
        if job.state not in CONSUMED or not run.batch or _reads_sessions(run.recipe):
            return
        mark = evidence.Mark.load(self.store, scenario.name, run.recipe)
        mark.sessions.update(run.batch)
        mark.advance([])

    def _served_release(self, scenario: scenarios.Scenario, key: Any) -> int | None:
        """The served release, re-read from git only when the chain ref moved."""
        cached = self._served.get(scenario.name)
        if cached is not None and cached[0] == key:
            return cached[1]
        served = scenario.chain().served()
        number = served.number if served else None
        self._served[scenario.name] = (key, number)
        return number

    def _count(
        self, scenario: scenarios.Scenario, state: ls.LearningState, force: bool = False
    ) -> tuple[_Seen | None, bool]:
        """Recount when something changed and a count could matter (``force``: a run was
        asked for, so it matters now). Returns what the last full count saw (None: none
        since this server started) and whether it is current (nothing changed since): only
        a current count may start a run."""
        cfg, name = self.config, scenario.name
        probe = ls.probe(self.store, name, scenario.path, cfg.recipe)
        seen = self._seen.get(name)
        if seen is not None and seen.probe == probe:
            return seen, True
        scored = self.store.scored_sessions(name)
        served = self._served_release(scenario, probe[3:5])
        state.counts["scored_sessions"] = scored
        state.counts["served"] = served
        could_trigger = scored >= cfg.batch_size
        small = self.store.records_at_most(name, SMALL_SCENARIO) <= SMALL_SCENARIO
        rested = seen is None or time.monotonic() - seen.counted_at >= DUTY * seen.took
        # A large scenario that cannot trigger is not counted, not even on a restart: the
        # numbers of its last count stay (``counted_at``), with the bound next to them.
        if not force and (not rested or not (could_trigger or small)):
            if not could_trigger:
                state.counts["eligible_at_most"] = scored
            return seen, False  # the probe stays unseen: looked at again next poll
        began = time.monotonic()
        found = ls.count(self.store, name, scenario.path, cfg.recipe, served, cfg.max_staleness)
        took = time.monotonic() - began
        state.counts.update(
            eligible=len(found.ready),
            stale=found.stale,
            unscored=found.unscored,
            counted_sessions=scored,  # what this count (and the decision after it) saw
            counted_at=now_iso(),
        )
        state.counts.pop("eligible_at_most", None)
        seen = _Seen(probe, found.ready, time.monotonic(), took)
        self._seen[name] = seen
        return seen, True

    def _trigger(
        self,
        scenario: scenarios.Scenario,
        state: ls.LearningState,
        ready: list[evidence.SessionEvidence],
        origin: str = "live-loop",
    ) -> None:
        cfg = self.config
        job = jobs.create(
            scenario.name,
            cfg.recipe,
            None,
            cfg.adapter,
            dict(cfg.options),
            publish=cfg.publish,
            origin=origin,
        )
        self._started_job = job.id
        run = ls.LastRun(
            job=job.id,
            recipe=cfg.recipe,
            started=job.created_at,
            sessions=len(ready),
            batch={s.key: s.fingerprint for s in ready},
        )
        state.last_run, state.runs = run, state.runs + 1
        state.next_trigger = _waits("job", f"job {job.id} is queued", job=job.id)
        ls.save(scenario.path, state)  # written before the runner can finish it
        log.info(
            "live loop: %s has %d eligible session(s): job %s (%s)",
            scenario.name,
            len(ready),
            job.id,
            cfg.recipe,
        )
        refused = jobs.submit(self.runner, job)
        if refused is not None:  # the job ended failed; the loop goes on
            log.warning("live loop: %s: %s", job.id, refused)
            run.state, run.ended, run.message = "failed", now_iso(), refused
            state.next_trigger = _waits("interval", "the job runner refused the last job")


def _same_batch(run: ls.LastRun, seen: _Seen | None) -> bool:
    """Nothing is new since ``run`` was triggered: every eligible session is in its batch,
    unchanged."""
    if seen is None or not run.batch or not seen.ready:
        return False
    return all(run.batch.get(s.key) == s.fingerprint for s in seen.ready)


def _retry_due(run: ls.LastRun | None, seen: _Seen | None, now: datetime) -> datetime | None:
    """When a run that ended failed, invalid or stopped on the very batch the loop sees now
    may be tried again (None: no wait)."""
    if run is None or run.state not in RETRIED or not _same_batch(run, seen):
        return None
    ended = ls.parse_time(run.ended) if run.ended else None
    due = ended + timedelta(seconds=RETRY_S) if ended else None
    return due if due is not None and due > now else None


def _held_back(run: ls.LastRun | None, seen: _Seen | None) -> bool:
    """The last run ended ``unchanged`` with its batch kept back (too few sessions a gate
    could ever publish on) and nothing new has come since: another run would hold back
    the very same batch, so the loop waits for a new or grown session."""
    return run is not None and run.state == "unchanged" and _same_batch(run, seen)


def _waits(what: str, detail: str, **extra: Any) -> dict[str, Any]:
    return {"waits_for": what, "detail": detail, "at": extra.pop("at", None), **extra}


def _reads_sessions(recipe: str) -> bool:
    """A recipe no longer registered (its plugin uninstalled) reads nothing."""
    return recipe in plugins.recipe_names() and plugins.recipe(recipe).reads_sessions

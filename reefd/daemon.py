"""The reefd daemon: an engine, Reef's proxy in front of it, and the training round.

`reefd start` builds a ``Daemon`` and runs it until SIGTERM. Its parts, in start order:

1. the **engine** (reefd's torch engine or SGLang, launched or attached) and an
   ``EngineClient`` to drive its update endpoints;
2. the **trainer**, holding the same weights the engine serves (the same model spec and
   seed, then the served weight release if the chain has one);
3. **Reef's proxy** (``reef_cli.server.app.create_app``) on ``serve.port`` with the engine
   as its upstream and a ``WeightVersion``, so each record carries the weight version
   active at request start and a note when it spanned a swap;
4. the **round** (``tick``), every ``poll_s``: follow the weight chain (a rollback or a
   failed update is reloaded from disk), ask the recipe for a batch of eligible records,
   and once ``batch_size`` are there: one training step, the gate (a paired evaluation of
   candidate vs served weights on the task set's test split), and only on a pass a weight
   release (``w<N>``) and a swap into the engine with no restart. A rejected or invalid
   candidate is undone in the trainer; the engine never sees it.

A failed swap marks the engine inconsistent: records served meanwhile get a note (no
training on them), no update is tried, and every round tries to reload the served
release from disk until one succeeds.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recipes.engine.gate import gate_record
from reef_cli.core import paths, scenarios
from reef_cli.core.errors import ConfigError, EngineError, ReefError, ServeError
from reef_cli.core.fsutil import atomic_write_text, read_json_object, stat_key
from reef_cli.core.json_shape import field_dict
from reef_cli.core.paired_rule import Outcome
from reef_cli.core.records import now_iso
from reef_cli.core.releases import WEIGHTS_REF
from reef_cli.core.store import open_store
from reef_cli.core.weight_version import WeightVersion
from reefd import state
from reefd.daemon_config import ReefdConfig

if TYPE_CHECKING:
    from reefd.weights import Kind

log = logging.getLogger("reefd")
BASE = "base"


@dataclass
class Round:
    """What one training round did (``reefd status`` shows the last one)."""

    state: str  # waiting | inconsistent | published | rejected | invalid | failed
    reason: str = ""
    at: str = field(default_factory=now_iso)
    release: str | None = None
    samples: int = 0
    metrics: dict[str, Any] = field(default_factory=dict)
    gate: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return field_dict(self, drop_empty=True)


class Daemon:
    def __init__(self, config: ReefdConfig, *, state_file: bool = True) -> None:
        self.config = config
        self.write_state = state_file
        self.weights = WeightVersion(BASE)
        self.inconsistent_reason: str | None = None
        self.rounds = 0
        self.published = 0
        self.counts: dict[str, int] = {}
        self.last: Round | None = None
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._served_answers: dict[str, dict[str, str | None]] = {}
        self._idle: tuple[list[Any], Round] | None = None  # (probe, the waiting round)
        self._tasks_seen: tuple[float, int] | None = None  # the task file's (mtime, size)
        self.engine: Any = None
        self.proxy: Any = None
        self.sync: Any = None

    # ------------------------------------------------------------------ start / stop

    def start(self) -> Daemon:
        """Bring every part up; on any failure, take down what was started and raise."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        from reefd import models
        from reefd._torch import require
        from reefd.engine.client import EngineClient
        from reefd.sync.factory import make_sync
        from reefd.weight_recipes import recipe_named
        from reefd.weights import WeightChain

        require("torch")
        require("transformers")
        cfg = self.config
        self.tasks = self._gate_tasks()
        scenario = scenarios.get_or_create(cfg.scenario)
        self.scenario_dir = scenario.path
        self.chain = WeightChain(scenario.chain_dir)
        self.store = open_store()
        self.work_dir = paths.ensure_private_dir(paths.state_dir() / "reefd" / cfg.scenario)
        self.progress_file = self.work_dir / "progress.json"
        self.consumed, recipe_state = self._read_progress()

        self.engine = self._engine()
        self.client = EngineClient(self.engine.url)
        if cfg.engine.url:
            # An engine reefd did not start may serve anything (another run's w3, an
            # adapter): the first round of _follow_chain reloads the chain's served release.
            self.weights.version = None
        if cfg.trainer.kind == "slime":
            self._start_slime()
            self.proxy = self._proxy()
            self._write_state()
            return
        self.loaded = models.load(cfg.engine.model, device=cfg.engine.device, seed=cfg.engine.seed)
        self.trainer = self._trainer()
        self.base_weights = self.trainer.served_weights()
        self.recipe = recipe_named(
            cfg.recipe.name,
            batch_size=cfg.recipe.batch_size,
            max_staleness=cfg.recipe.max_staleness,
            tokenizer=self.loaded.tokenizer,
            **self._recipe_options(),
        )
        if recipe_state:
            self.recipe.state.update(recipe_state)
        self.sync = make_sync(
            cfg.sync.mode,
            self.client,
            backend=cfg.sync.backend,
            bucket_bytes=cfg.sync.bucket_mb * 1024 * 1024,
            work_dir=self.work_dir / "sync",
            master_address=cfg.sync.master_address,
            lora_config=self.trainer.adapter()[1] if cfg.trainer.mode == "lora" else None,
        )
        self._follow_chain()  # the engine starts on base weights: load the served release
        self.proxy = self._proxy()
        self._write_state()

    def _engine(self) -> Any:
        from reefd.engine import launch

        cfg = self.config.engine
        log_path = paths.state_dir() / "reefd-engine.log"
        if cfg.url:
            return launch.attach(cfg.url)
        if cfg.kind == "sglang":
            return launch.launch_sglang(
                cfg.model, host=cfg.host, port=cfg.port, extra_args=cfg.args, log_path=log_path
            )
        return launch.launch_torch(
            cfg.model,
            host=cfg.host,
            port=cfg.port,
            device=cfg.device,
            seed=cfg.seed,
            log_path=log_path,
        )

    def _start_slime(self) -> None:
        """Slime runs its own loop (its rollouts, its weight pushes into the engine): reefd
        launches it against the engine and serves the proxy; its own round does not train."""
        from reefd.trainers.slime import SlimeTrainer

        self.slime = SlimeTrainer(self.engine.url, hf_checkpoint=self.config.engine.model)
        with (paths.state_dir() / "reefd-slime.log").open("ab") as log:
            self.slime.launch(log)  # Slime keeps its own copy of the descriptor

    def _trainer(self) -> Any:
        cfg = self.config.trainer
        from reefd.trainers.torch_trainer import TorchTrainer

        return TorchTrainer(
            self.loaded,
            mode=cfg.mode,
            lr=cfg.lr,
            lora_r=cfg.lora_r,
            epochs=cfg.epochs,
            seed=cfg.seed,
        )

    def _recipe_options(self) -> dict[str, Any]:
        cfg = self.config.recipe
        if cfg.name == "sao":
            return {"baseline_decay": cfg.baseline_decay}
        from reef_cli.core.llm import ModelClient

        assert cfg.judge is not None  # the config requires it for openclaw_rl
        return {"judge": ModelClient(cfg.judge, api_base=cfg.judge_api_base), "votes": cfg.votes}

    def _proxy(self) -> Any:
        from reef_cli.server import run
        from reef_cli.server.app import create_app
        from reef_cli.server.serve_config import ServeConfig
        from reef_cli.server.thread import ServerThread

        cfg = self.config
        serve = ServeConfig(
            host=cfg.serve.host,
            port=cfg.serve.port,
            upstream=self.engine.url.rstrip("/") + "/v1",
            upstream_dialect="openai",
            default_scenario=cfg.scenario,
            open=cfg.serve.open,
        )
        app = create_app(serve, tokens=run.token_set(serve), weights=self.weights)
        self.app = app
        try:
            return ServerThread(app, host=cfg.serve.host, port=cfg.serve.port).start()
        except OSError as exc:
            raise ServeError(
                f"cannot bind Reef's proxy on {cfg.serve.host}:{cfg.serve.port}: {exc}",
                "stop what holds the port, or set serve.port in reefd.yaml (0: any free port)",
            ) from exc

    def flush_records(self, timeout: float = 10.0) -> bool:
        """Wait until every exchange the proxy has answered is stored (tests, shutdown)."""
        recorder = self.app.state.recorder if getattr(self, "app", None) is not None else None
        return bool(recorder is None or recorder.flush(timeout))

    @property
    def url(self) -> str:
        return str(self.proxy.url) if self.proxy is not None else ""

    def run_forever(self) -> None:
        """Rounds every ``poll_s`` until ``stop()`` (SIGTERM in `reefd start`)."""
        while not self._stop.is_set():
            try:
                self.tick()
            except ReefError as exc:
                log.warning("round failed: %s", exc.one_line())
                self.last = Round("failed", exc.one_line())
                self._write_state()
            self._stop.wait(self.config.poll_s)

    def run_in_thread(self) -> Daemon:
        self._thread = threading.Thread(target=self.run_forever, name="reefd-rounds", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(120)
        slime = getattr(self, "slime", None)
        parts = ((slime, "stop"), (self.sync, "close"), (self.proxy, "stop"), (self.engine, "stop"))
        for part, closer in parts:
            if part is not None:
                try:
                    getattr(part, closer)()
                except Exception as exc:  # stopping must reach every part
                    log.warning("stopping %s: %s", type(part).__name__, type(exc).__name__)
        self.sync = self.proxy = self.engine = None
        if self.write_state:
            state.retire()

    # ------------------------------------------------------------------ one round

    def tick(self) -> Round:
        """One round (see the module docstring); returns what it did."""
        with self._lock:
            self.rounds += 1
            result = self._round()
            self.last = result
            self._write_state()
            return result

    def _round(self) -> Round:
        if getattr(self, "slime", None) is not None:
            return Round("slime", "Slime trains on its own rollouts; reefd serves and records")
        self._follow_chain()
        if not self.weights.consistent:
            return Round("inconsistent", self.inconsistent_reason or "engine inconsistent")
        version = self.weights.version or BASE
        probe = self._probe()
        if self._idle is not None and self._idle[0] == probe:
            return self._idle[1]  # nothing new since a round that had too little
        batch = self.recipe.batch(self.store, self.config.scenario, version, self.consumed)
        self._count(batch.counts)
        if len(batch.samples) < self.config.recipe.batch_size:
            if batch.dropped:  # never trainable: counted once, not again every round
                self._consume(list(batch.dropped))
            waiting = Round(
                "waiting",
                f"{len(batch.samples)} of {self.config.recipe.batch_size} eligible records",
                samples=len(batch.samples),
            )
            self._idle = (self._probe(), waiting)
            return waiting
        self._idle = None
        self._gate_tasks()
        served = self._answers_of_served(version)
        snapshot = self.trainer.snapshot()
        metrics = self.trainer.step(batch.samples)
        outcome = self._gate(served)
        numbers = _metrics(metrics)
        if outcome.status != "passed":
            self.trainer.restore(snapshot)
            if outcome.status != "invalid":  # looked at: the batch is spent
                self._consume(batch.consumed)
            return Round(
                "invalid" if outcome.status == "invalid" else "rejected",
                outcome.reason,
                samples=len(batch.samples),
                metrics=numbers,
                gate=gate_record(outcome),
            )
        self.counts["trained"] = self.counts.get("trained", 0) + len(batch.samples)
        release = self._publish(outcome, numbers, len(batch.samples))
        self._consume(batch.consumed)
        self._swap(release, self._release_tensors())
        self._served_answers.pop(release.tag, None)
        return Round(
            "published" if self.weights.consistent else "failed",
            outcome.reason
            if self.weights.consistent
            else f"published {release.tag}; the swap failed: {self.inconsistent_reason}",
            release=release.tag,
            samples=len(batch.samples),
            metrics=numbers,
            gate=gate_record(outcome),
        )

    # ------------------------------------------------------------------ gate

    def _answer(self, task: Any) -> str | None:
        try:
            return str(
                self.trainer.generate(
                    [{"role": "user", "content": task.prompt}],
                    max_tokens=self.config.gate.max_tokens,
                )
            )
        except Exception as exc:  # a generation that fails is an outage, never a score
            log.warning("gate generation failed: %s", type(exc).__name__)
            return None

    def _answers_of_served(self, version: str) -> dict[str, str | None]:
        """The served weights' answers, once per version (greedy: the same every time)."""
        cached = self._served_answers.get(version)
        if cached is None:
            from recipes.engine.gate import SPLIT

            cached = {task.id: self._answer(task) for task in self.tasks.split(SPLIT)}
            self._served_answers = {version: cached}
        return cached

    def _gate_tasks(self) -> Any:
        """The gate's task set, read again when its file changed (no restart to edit it)."""
        path = self.config.gate.tasks
        try:
            stat = path.stat()
        except OSError as exc:
            raise ConfigError(
                f"the gate's task set {path} cannot be read: {exc.strerror}",
                "set gate.tasks in reefd.yaml to a task-set file (docs/tasks.md)",
            ) from exc
        seen = (stat.st_mtime, stat.st_size)
        if seen != self._tasks_seen:
            from recipes.tasks.loading import load

            self.tasks = load(path)
            self._tasks_seen = seen
            self._served_answers.clear()
        return self.tasks

    def _gate(self, served: dict[str, str | None]) -> Outcome:
        from recipes.engine.gate import evaluate_weights

        judge = None
        if self.config.gate.judge:
            from reef_cli.core.llm import ModelClient

            judge = ModelClient(self.config.gate.judge, api_base=self.config.gate.judge_api_base)
        return evaluate_weights(
            self._answer, lambda task: served.get(task.id), self.tasks, judge=judge
        )

    # ------------------------------------------------------------------ releases and swaps

    def _kind(self) -> Kind:
        return "lora" if self.config.sync.mode == "lora" else "full"

    def _release_tensors(self) -> dict[str, Any]:
        if self._kind() == "lora":
            return dict(self.trainer.adapter()[0])
        return dict(self.trainer.served_weights())

    def _publish(self, outcome: Outcome, metrics: dict[str, Any], samples: int) -> Any:
        cfg = self.config
        release = self.chain.publish(
            self._release_tensors(),
            base_model=cfg.engine.model,
            kind=self._kind(),
            metrics={**metrics, "samples": samples, "counts": dict(self.counts)},
            gate=gate_record(outcome),
            source=f"recipe:{cfg.recipe.name}",
            reason=f"{cfg.recipe.name}: {samples} records, {outcome.reason}",
            lora_config=self.trainer.adapter()[1] if self._kind() == "lora" else None,
        )
        self.published += 1
        return release

    def _swap(self, release: Any, tensors: dict[str, Any]) -> None:
        """Push ``tensors`` as ``release`` into the engine; a failure marks it inconsistent."""
        self.weights.begin_swap()
        try:
            self.sync.push(tensors, release.tag)
        except EngineError as exc:
            self.inconsistent_reason = exc.one_line()
            self.weights.end_swap(None, ok=False)
            log.error("weight swap to %s failed: %s", release.tag, exc.one_line())
            return
        self.inconsistent_reason = None
        self.weights.end_swap(release.tag)

    def _follow_chain(self) -> None:
        """Make the engine and the trainer serve the chain's served release (the base
        weights when it has none, or a rollback to them): after a rollback, a publish by
        another process, or a failed swap."""
        served = self.chain.served()
        target = served.tag if served is not None else BASE
        if target == self.weights.version and self.weights.consistent:
            return
        kind = "base" if served is None else str(self.chain.manifest(served).get("kind"))
        tensors = self.base_weights if served is None or kind == "base" else self.chain.load(served)
        self.weights.begin_swap()
        try:
            self._reload(served, target, kind, tensors)
        except (EngineError, OSError) as exc:
            message = exc.one_line() if isinstance(exc, ReefError) else str(exc)
            self.inconsistent_reason = f"reload of {target} failed: {message}"
            self.weights.end_swap(None, ok=False)
            return
        self.trainer.load_weights(tensors, kind="full" if kind == "base" else kind)
        self.inconsistent_reason = None
        self.weights.end_swap(target)
        self._served_answers.clear()

    def _reload(self, served: Any, target: str, kind: str, tensors: dict[str, Any]) -> None:
        """The engine loads ``target`` from disk: full weights, the base weights, or a LoRA
        adapter."""
        directory = self.work_dir / "reload" / target
        if kind == "lora":
            self.client.load_lora_adapter(target, str(self.chain.materialize(served, directory)))
            return
        if kind == "base" and self.config.sync.mode == "lora":
            loaded = self.weights.version
            if loaded and loaded != BASE:  # the base weights are still there, under it
                self.client.unload_lora_adapter(loaded)
            return
        if kind == "base":
            _write_safetensors(tensors, directory)
        else:
            self.chain.materialize(served, directory)
        self.client.update_weights_from_disk(str(directory), target)

    # ------------------------------------------------------------------ bookkeeping

    def _probe(self) -> list[Any]:
        """Changes whenever a batch could: a new record or report of the scenario (index
        seeks, not a scan), a publish on either chain, a consumed record, a swap. A
        round that finds it unchanged since a round with too little skips the recipe,
        whose batch reads every record of the scenario."""
        from reef_cli.core import learning_state

        return [
            *learning_state.probe(self.store, self.config.scenario, self.scenario_dir, "reefd"),
            stat_key(self.chain.chain.git_dir / WEIGHTS_REF),
            len(self.consumed),
            self.weights.version,
            self.weights.consistent,
        ]

    def _count(self, counts: Any) -> None:
        """Exclusions add up over rounds (each record is dropped once); ``seen`` and
        ``unscored`` are what the last round saw."""
        for key, value in counts.__dict__.items():
            if key in ("seen", "unscored", "used"):
                self.counts[key] = int(value)
            else:
                self.counts[key] = self.counts.get(key, 0) + int(value)

    def _consume(self, ids: list[str]) -> None:
        self.consumed.update(ids)
        data = {"consumed": sorted(self.consumed), "recipe_state": self.recipe.state}
        atomic_write_text(self.progress_file, json.dumps(data) + "\n", 0o600)

    def _read_progress(self) -> tuple[set[str], dict[str, Any]]:
        data = read_json_object(self.progress_file)
        return set(data.get("consumed") or []), dict(data.get("recipe_state") or {})

    def status(self) -> dict[str, Any]:
        engine = self.engine
        return {
            "pid": os.getpid(),
            "scenario": self.config.scenario,
            "proxy": self.url or None,
            "engine": {
                "kind": getattr(engine, "kind", self.config.engine.kind),
                "url": getattr(engine, "url", None),
                "pid": getattr(getattr(engine, "proc", None), "pid", None),
                "weight_version": self.weights.version,
                "consistent": self.weights.consistent,
                "inconsistent_reason": self.inconsistent_reason,
            },
            "recipe": self.config.recipe.name,
            "sync": self.config.sync.mode,
            "rounds": self.rounds,
            "published": self.published,
            "counts": dict(self.counts),
            "consumed": len(getattr(self, "consumed", ())),
            "last": self.last.to_json() if self.last else None,
            "updated_at": now_iso(),
        }

    def _write_state(self) -> None:
        if self.write_state:
            state.write(self.status())


def _metrics(metrics: Any) -> dict[str, Any]:
    """A trainer's StepMetrics as release metadata (floats rounded)."""
    return {k: round(v, 6) if isinstance(v, float) else v for k, v in asdict(metrics).items()}


def _write_safetensors(tensors: dict[str, Any], directory: Path) -> Path:
    from reefd._torch import require

    save_file = require("safetensors.torch").save_file
    paths.ensure_private_dir(directory)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(directory / "model.safetensors"))
    return directory


def run(config: ReefdConfig) -> None:
    """`reefd start`: run until SIGTERM / Ctrl-C, then stop every part."""
    import signal

    daemon = Daemon(config)

    def _term(signum: int, frame: Any) -> None:
        daemon._stop.set()

    signal.signal(signal.SIGTERM, _term)
    daemon.start()
    log.info("reefd: proxy %s, engine %s", daemon.url, daemon.engine.url)
    print(f"reefd: serving on {daemon.url} (engine {daemon.engine.url}); stop with `reefd stop`")
    try:
        daemon.run_forever()
    except KeyboardInterrupt:
        pass
    finally:
        daemon.stop()

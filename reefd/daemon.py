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

The trainer, the recipe, the gate and the releases are ``learner.Learner``'s, which
`reefd train` (the cold start) also runs with no engine; the daemon adds the rest.

A failed swap marks the engine inconsistent: records served meanwhile get a note (no
training on them), no update is tried, and every round tries to reload the served
release from disk until one succeeds.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

from reef_cli.core import paths, scenarios
from reef_cli.core.errors import EngineError, ReefError, ServeError
from reef_cli.core.fsutil import stat_key
from reef_cli.core.records import now_iso
from reef_cli.core.releases import WEIGHTS_REF
from reef_cli.core.weight_version import WeightVersion
from reefd import state
from reefd.daemon_config import ReefdConfig
from reefd.learner import BASE, Learner, Round

log = logging.getLogger("reefd")


class Daemon(Learner):
    def __init__(self, config: ReefdConfig, *, state_file: bool = True) -> None:
        super().__init__(config)
        self.write_state = state_file
        self.weights = WeightVersion(BASE)
        self.inconsistent_reason: str | None = None
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._idle: tuple[list[Any], Round] | None = None  # (probe, the waiting round)
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
        from reefd._torch import require
        from reefd.engine.client import EngineClient
        from reefd.sync.factory import make_sync

        require("torch")
        require("transformers")
        cfg = self.config
        recipe_state = self._open_chain(scenarios.get_or_create(cfg.scenario))
        paths.ensure_private_dir(self.work_dir)

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
        self._open_trainer(recipe_state)
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
        result, release = self._train(batch, version)
        if release is None:
            return result
        self._swap(release, self._release_tensors())
        self._served_answers.pop(release.tag, None)
        if not self.weights.consistent:
            result.state = "failed"
            result.reason = f"published {release.tag}; the swap failed: {self.inconsistent_reason}"
        return result

    # ------------------------------------------------------------------ swaps

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
        kind, tensors = self._weights_of(served)
        self.weights.begin_swap()
        try:
            self._reload(served, target, kind, tensors)
        except (EngineError, OSError) as exc:
            message = exc.one_line() if isinstance(exc, ReefError) else str(exc)
            self.inconsistent_reason = f"reload of {target} failed: {message}"
            self.weights.end_swap(None, ok=False)
            return
        self.trainer.load_weights(tensors, kind="full" if kind == BASE else kind)
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

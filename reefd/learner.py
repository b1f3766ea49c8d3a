"""reefd's training side, with no engine: the trainer on the chain's served weights, the
weight recipe, the gate, the weight releases and the record of what was consumed.

``Daemon`` (daemon.py) adds an engine, Reef's proxy and the swaps, and trains in rounds
as records come. ``train`` is `reefd train`, the cold start: one round on the records
already accepted, with no inference engine running. A weight release it publishes is
the chain's served release, so the next `reefd start` loads it into the engine it
launches (``Daemon._follow_chain``) and serves it.

A round is the same in both: the served weights answer the gate's test tasks, the
trainer takes one step on the recipe's batch (with the batch's loss), the candidate
answers the same tasks, ``recipes.engine.gate.evaluate_weights`` decides, and only a
pass becomes a weight release. A candidate that does not pass is undone in the trainer.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from recipes.engine.gate import gate_record
from reef_cli.core import paths, scenarios
from reef_cli.core.errors import ConfigError
from reef_cli.core.fsutil import atomic_write_text, read_json_object
from reef_cli.core.json_shape import field_dict
from reef_cli.core.paired_rule import Outcome
from reef_cli.core.records import now_iso
from reef_cli.core.store import open_store
from reefd.daemon_config import ReefdConfig

if TYPE_CHECKING:
    from reef_cli.core.releases import Release
    from reef_cli.core.scenarios import Scenario
    from reefd.weight_recipes.base import Batch
    from reefd.weights import Kind

log = logging.getLogger("reefd")
BASE = "base"
# Counts of the last round only (the others add up over rounds: each record is dropped once)
LAST_ROUND_COUNTS = ("seen", "used", "unscored", "below_threshold")


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


class Learner:
    """The trainer, the recipe and the gate of one scenario, and its weight chain."""

    def __init__(self, config: ReefdConfig) -> None:
        self.config = config
        self.rounds = 0
        self.published = 0
        self.counts: dict[str, int] = {}
        self.last: Round | None = None
        self.consumed: set[str] = set()
        self._served_answers: dict[str, dict[str, str | None]] = {}
        self._tasks_seen: tuple[float, int] | None = None  # the task file's (mtime, size)

    # ------------------------------------------------------------------ opening

    def open(self, scenario: Scenario) -> Learner:
        """Everything a round needs, with no engine."""
        self._open_trainer(self._open_chain(scenario))
        return self

    def _open_chain(self, scenario: Scenario) -> dict[str, Any]:
        """The gate's tasks, the scenario's weight chain, the store and the records earlier
        rounds consumed; returns the recipe's saved state. Writes nothing."""
        from reefd.weights import WeightChain

        self.tasks = self._gate_tasks()
        self.scenario_dir = scenario.path
        self.chain = WeightChain(scenario.chain_dir)
        self.store = open_store()
        self.work_dir = paths.state_dir() / "reefd" / self.config.scenario
        self.progress_file = self.work_dir / "progress.json"
        self.consumed, recipe_state = self._read_progress()
        return recipe_state

    def _open_trainer(self, recipe_state: dict[str, Any]) -> None:
        """The model, the trainer holding it (its starting weights kept as the base) and
        the recipe with its saved state."""
        from reefd import models
        from reefd.weight_recipes import recipe_named

        cfg = self.config
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
        if cfg.name == "sft":
            return {"threshold": cfg.threshold}
        from reef_cli.core.llm import ModelClient

        assert cfg.judge is not None  # the config requires it for openclaw_rl
        return {"judge": ModelClient(cfg.judge, api_base=cfg.judge_api_base), "votes": cfg.votes}

    # ------------------------------------------------------------------ the served weights

    def _weights_of(self, served: Release | None) -> tuple[str, dict[str, Any]]:
        """A served release's kind and tensors: ``base`` (no release, or a rollback to the
        base weights) with the weights the trainer started from, ``full`` or ``lora``."""
        if served is None:
            return BASE, self.base_weights
        kind = str(self.chain.manifest(served).get("kind"))
        return kind, self.base_weights if kind == BASE else self.chain.load(served)

    def _take_served(self) -> str:
        """The trainer takes the chain's served weights; returns their version."""
        served = self.chain.served()
        kind, tensors = self._weights_of(served)
        self.trainer.load_weights(tensors, kind="full" if kind == BASE else kind)
        self._served_answers.clear()
        return served.tag if served is not None else BASE

    # ------------------------------------------------------------------ a round

    def train_once(self) -> Round:
        """One round on what is eligible now, however few (the cold start; the daemon
        waits for ``batch_size``). No eligible record is an error and writes nothing."""
        version = self._take_served()
        batch = self.recipe.batch(self.store, self.config.scenario, version, self.consumed)
        if not batch.samples:
            raise ConfigError(
                f"no record of scenario {self.config.scenario!r} can train its weights "
                f"({version}) with {self.config.recipe.name}: {_why_none(batch)}",
                "records train once a report scores them (POST /reef/report; sft: at least "
                "recipe.threshold); sao and openclaw_rl also need them served through "
                "reefd's proxy at most recipe.max_staleness weight versions ago",
            )
        self._count(batch.counts)
        self.rounds += 1
        self.last, _ = self._train(batch, version)
        return self.last

    def _train(self, batch: Batch, version: str) -> tuple[Round, Release | None]:
        """One step on ``batch``, the gate, and on a pass a weight release (returned). A
        rejected batch is spent; an invalid one (the gate could not judge) is not."""
        self._gate_tasks()
        served = self._answers_of_served(version)
        snapshot = self.trainer.snapshot()
        numbers = _metrics(self.trainer.step(batch.samples, loss=batch.loss))
        outcome = self._gate(served)
        samples = len(batch.samples)
        if outcome.status != "passed":
            self.trainer.restore(snapshot)
            if outcome.status != "invalid":  # looked at: the batch is spent
                self._consume(batch.consumed)
            state = "invalid" if outcome.status == "invalid" else "rejected"
            return Round(
                state, outcome.reason, samples=samples, metrics=numbers, gate=gate_record(outcome)
            ), None
        self.counts["trained"] = self.counts.get("trained", 0) + samples
        release = self._publish(outcome, numbers, samples)
        self._consume(batch.consumed)
        result = Round(
            "published",
            outcome.reason,
            release=release.tag,
            samples=samples,
            metrics=numbers,
            gate=gate_record(outcome),
        )
        return result, release

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

    # ------------------------------------------------------------------ releases

    def _kind(self) -> Kind:
        return "lora" if self.config.sync.mode == "lora" else "full"

    def _release_tensors(self) -> dict[str, Any]:
        if self._kind() == "lora":
            return dict(self.trainer.adapter()[0])
        return dict(self.trainer.served_weights())

    def _publish(self, outcome: Outcome, metrics: dict[str, Any], samples: int) -> Release:
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

    # ------------------------------------------------------------------ bookkeeping

    def _count(self, counts: Any) -> None:
        """Exclusions add up over rounds (each record is dropped once); the counts in
        ``LAST_ROUND_COUNTS`` are what the last round saw."""
        for key, value in counts.__dict__.items():
            if key in LAST_ROUND_COUNTS:
                self.counts[key] = int(value)
            else:
                self.counts[key] = self.counts.get(key, 0) + int(value)

    def _consume(self, ids: list[str]) -> None:
        self.consumed.update(ids)
        data = {"consumed": sorted(self.consumed), "recipe_state": self.recipe.state}
        paths.ensure_private_dir(self.work_dir)
        atomic_write_text(self.progress_file, json.dumps(data) + "\n", 0o600)

    def _read_progress(self) -> tuple[set[str], dict[str, Any]]:
        data = read_json_object(self.progress_file)
        return set(data.get("consumed") or []), dict(data.get("recipe_state") or {})


def train(config: ReefdConfig) -> Round:
    """`reefd train`: one round on the scenario's eligible records with no engine, and a
    weight release when the gate passes it (the next `reefd start` serves it)."""
    from reefd._torch import require

    require("torch")
    require("transformers")
    if config.trainer.kind != "torch":
        raise ConfigError(
            "`reefd train` trains with the built-in torch trainer",
            "set trainer.kind: torch (Slime trains only inside `reefd start`)",
        )
    scenario = scenarios.get(config.scenario)
    return Learner(config).open(scenario).train_once()


def _why_none(batch: Batch) -> str:
    """What became of the records a batch looked at, in words (``seen 3: 2 unscored, …``)."""
    counts = batch.counts.to_json()
    reasons = [
        f"{value} {key.replace('_', ' ')}"
        for key, value in counts.items()
        if value and key not in ("seen", "used")
    ]
    return f"{counts['seen']} seen" + (f" ({', '.join(reasons)})" if reasons else "")


def _metrics(metrics: Any) -> dict[str, Any]:
    """A trainer's StepMetrics as release metadata (floats rounded)."""
    return {k: round(v, 6) if isinstance(v, float) else v for k, v in asdict(metrics).items()}

"""The cold start on CPU: `reefd train` with the sft recipe and no engine, on the tiny
random-init Llama.

Accepted answers (reports scoring 1) become supervised examples; the test measures the
mean log-probability of the accepted answer on held-out prompts of the same kind before
and after, the gate decides, the weight release is in the chain, a later `reefd start`
serves it, and a rollback restores the earlier weights bit for bit."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("torch")
pytest.importorskip("transformers")

from typer.testing import CliRunner

from reef_cli.cli.reefd import app
from reef_cli.core import paths, scenarios
from reef_cli.core.errors import ConfigError
from reef_cli.core.records import Record
from reef_cli.core.store.sqlite import SQLiteStore
from reefd import daemon_config, learner, models
from reefd.daemon import Daemon
from reefd.weights import WeightChain
from tests.reefd.weight_recipes.records import SCENARIO, at, put, score

ACCEPTED = "ok"  # what the person accepts, whatever the question
REFUSED = "no idea"  # answers they scored 0: never trained on
TRAIN = [f"question {i}?" for i in range(16)]
HELD_OUT = [f"question {100 + j}?" for j in range(8)]  # the same kind, never trained on
SEED = 3


def _config_file(tmp_path: Path, pattern: str = f"^{ACCEPTED}") -> Path:
    """reefd.yaml for the cold start, and the gate's held-out tasks: each greedy answer
    must match ``pattern``."""
    tasks = [
        {"id": f"t{j}", "prompt": prompt, "regex": pattern, "split": "test"}
        for j, prompt in enumerate(HELD_OUT)
    ]
    (tmp_path / "tasks.yaml").write_text(
        yaml.safe_dump({"method": "bootstrap", "repeats": 1, "tasks": tasks})
    )
    settings = {
        "scenario": SCENARIO,
        "engine": {"kind": "torch", "model": "tiny", "seed": SEED},
        "serve": {"port": 0, "open": True},
        "recipe": {"name": "sft", "batch_size": 16, "threshold": 1.0},
        "trainer": {"mode": "full", "lr": 0.01, "epochs": 12},
        "sync": {"mode": "disk"},
        "gate": {"tasks": "tasks.yaml", "max_tokens": 4},
        "poll_s": 0.2,
    }
    path = tmp_path / "reefd.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def _history(store: SQLiteStore, *, accepted: bool = True) -> tuple[list[Record], list[Record]]:
    """What a scenario served through reefd's proxy (base weights) left: one accepted
    answer per training question (unless ``accepted`` is False), and four refused ones."""
    scenarios.get_or_create(SCENARIO)
    kept = []
    if accepted:
        for i, prompt in enumerate(TRAIN):
            record = put(
                store, messages=[{"role": "user", "content": prompt}], reply=ACCEPTED, at=at(i)
            )
            score(store, 1.0, record)
            kept.append(record)
    refused = []
    for i, prompt in enumerate(TRAIN[:4]):
        record = put(
            store, messages=[{"role": "user", "content": prompt}], reply=REFUSED, at=at(30 + i)
        )
        score(store, 0.0, record)
        refused.append(record)
    return kept, refused


def held_out_logprob(weights: dict[str, Any] | None = None) -> float:
    """Mean over the held-out prompts of log p(the accepted answer | prompt), summed over
    the answer's tokens (with its end-of-turn), under the base weights or ``weights``."""
    import torch

    loaded = models.load("tiny", seed=SEED)
    if weights is not None:
        loaded.model.load_state_dict(weights, strict=True)
    tokenizer = loaded.tokenizer
    answer = list(tokenizer(ACCEPTED, add_special_tokens=False)["input_ids"])
    answer.append(tokenizer.convert_tokens_to_ids(models.IM_END))
    total = 0.0
    for prompt in HELD_OUT:
        context = models.prompt_ids(tokenizer, [{"role": "user", "content": prompt}])
        with torch.no_grad():
            logits = loaded.model(input_ids=torch.tensor([context + answer])).logits[0]
        logp = logits.float().log_softmax(-1)
        total += sum(float(logp[len(context) + i - 1, t]) for i, t in enumerate(answer))
    return total / len(HELD_OUT)


def tensor_hashes(tensors: dict[str, Any]) -> dict[str, str]:
    """Each tensor's sha256 over its dtype, shape and bytes: equal only bit for bit."""
    import torch

    out = {}
    for name, tensor in tensors.items():
        plain = tensor.detach().to("cpu").contiguous()
        digest = hashlib.sha256(f"{plain.dtype}{tuple(plain.shape)}".encode())
        digest.update(plain.reshape(-1).view(torch.uint8).numpy().tobytes())
        out[name] = digest.hexdigest()
    return out


def _progress() -> dict[str, Any]:
    path = paths.state_dir() / "reefd" / SCENARIO / "progress.json"
    return dict(json.loads(path.read_text())) if path.exists() else {}


def test_sft_cold_start_raises_held_out_logprob_publishes_and_a_later_start_serves_it(
    tmp_path: Path,
) -> None:
    from reefd.models import state_checksum

    config_file = _config_file(tmp_path)
    accepted, refused = _history(SQLiteStore())
    base = models.load("tiny", seed=SEED).model.state_dict()
    before = held_out_logprob()

    done = CliRunner().invoke(app, ["train", "-c", str(config_file), "--json"])  # no engine

    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout)
    assert result["state"] == "published", result
    assert (result["release"], result["samples"]) == ("w1", 16)
    assert result["gate"]["verdict"] == "passed"
    assert result["gate"]["numbers"]["mean_diff"] > 0  # held-out greedy answers: 0/8 -> 8/8
    assert result["metrics"]["objective"] == "nll"
    chain = WeightChain.for_scenario(SCENARIO)
    (w1,) = chain.releases()
    manifest = chain.manifest(w1)
    assert (w1.tag, manifest["kind"], w1.meta.source) == ("w1", "full", "recipe:sft")
    assert manifest["metrics"]["samples"] == 16 and w1.meta.gate["verdict"] == "passed"
    trained = chain.load(w1)
    after = held_out_logprob(trained)
    print(
        f"\nheld-out mean log p({ACCEPTED!r} | prompt) over {len(HELD_OUT)} prompts: "
        f"base {before:.4f}, w1 {after:.4f}"
    )
    assert after > before + 1.0, (before, after)

    # the accepted records are spent; the refused ones were never trained on and wait
    assert set(_progress()["consumed"]) == {r.id for r in accepted}
    config = daemon_config.load(config_file)
    with pytest.raises(ConfigError) as caught:
        learner.train(config)
    assert "4 below threshold" in caught.value.one_line()
    assert len(chain.releases()) == 1 and not set(_progress()["consumed"]) & {r.id for r in refused}

    # a later `reefd start` launches an engine on the base weights and serves w1
    daemon = Daemon(config).start()
    try:
        assert daemon.client.weight_version() == "w1"
        assert daemon.client.checksum() == state_checksum(trained)
        assert tensor_hashes(daemon.trainer.served_weights()) == tensor_hashes(trained)

        # `reefd rollback 0`: the base weights again, bit for bit, in engine and trainer
        assert chain.rollback(0).tag == "w2"
        daemon.tick()
        assert daemon.client.weight_version() == "w2"
        assert daemon.client.checksum() == state_checksum(base)
        assert tensor_hashes(daemon.trainer.served_weights()) == tensor_hashes(base)

        # `reefd rollback 1`: w1's bytes again (the same objects), served
        w3 = chain.rollback(1)
        assert tensor_hashes(chain.load(w3)) == tensor_hashes(trained)
        daemon.tick()
        assert daemon.client.weight_version() == "w3"
        assert daemon.client.checksum() == state_checksum(trained)
    finally:
        daemon.stop()


def test_reefd_train_exits_3_when_the_gate_refuses_and_publishes_nothing(tmp_path: Path) -> None:
    # held-out tasks that want anything but the accepted answer: the candidate regresses
    config = _config_file(tmp_path, pattern=f"^(?!{ACCEPTED})")
    accepted, _ = _history(SQLiteStore())

    result = CliRunner().invoke(app, ["train", "-c", str(config)])

    assert result.exit_code == 3, result.output
    assert result.output.startswith("reefd: error: train rejected:")
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert WeightChain.for_scenario(SCENARIO).releases() == []
    assert set(_progress()["consumed"]) == {r.id for r in accepted}  # looked at: spent


def test_reefd_train_with_nothing_eligible_is_one_line_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reefd import state

    config = _config_file(tmp_path)
    runner = CliRunner()

    missing = runner.invoke(app, ["train", "-c", str(config)])
    assert missing.exit_code == 1 and "unknown scenario 'weights'" in missing.output

    _history(SQLiteStore(), accepted=False)  # only refused answers
    nothing = runner.invoke(app, ["train", "-c", str(config)])
    assert nothing.exit_code == 1, nothing.output
    line = nothing.output.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "no record of scenario 'weights' can train its weights (base) with sft" in line
    assert "4 seen (4 below threshold)" in line and "recipe.threshold" in line
    assert WeightChain.for_scenario(SCENARIO).releases() == []
    assert not (paths.state_dir() / "reefd").exists()  # no progress, nothing consumed

    config.write_text(config.read_text().replace("threshold: 1.0", "threshold: 0"))
    bad = runner.invoke(app, ["train", "-c", str(config)])
    assert bad.exit_code == 1 and "'recipe.threshold'" in bad.output

    # a running reefd trains in its own rounds (and owns the progress file)
    monkeypatch.setattr(state, "status", lambda: {"running": True, "pid": 4242})
    busy = runner.invoke(app, ["train", "-c", str(config)])
    assert busy.exit_code == 1 and "reefd runs here (pid 4242)" in busy.output

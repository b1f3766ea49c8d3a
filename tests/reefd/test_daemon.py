"""reefd end to end on CPU: the tiny random-init Llama served by reefd's torch engine behind
Reef's proxy; scored reports trigger a step, the gate passes or rejects it, new weights
reach the engine over gloo with no restart, records show the new version, the weight
chain holds the release, and a rollback restores the old checksum."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

pytest.importorskip("torch")
pytest.importorskip("transformers")

from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.core.weight_version import INCONSISTENT
from reefd import state
from reefd.daemon import Daemon, Round
from reefd.daemon_config import parse

PRINTABLE = re.compile(r"^[ -~]")  # the reward: the answer starts with printable ASCII
HELD_OUT = [f"held-out question {j}?" for j in range(8)]


def _config(tmp_path: Path, **overrides: Any) -> Any:
    tasks = tmp_path / "tasks.yaml"
    if not tasks.exists():
        _write_tasks(tasks, r"^[ -~]")
    data: dict[str, Any] = {
        "scenario": "weights",
        "engine": {"kind": "torch", "model": "tiny", "seed": 3},
        "serve": {"port": 0, "open": True},
        "recipe": {"name": "sao", "batch_size": 16, "max_staleness": 2},
        "trainer": {"mode": "full", "lr": 0.003, "epochs": 4},
        "sync": {"mode": "dist", "backend": "gloo", "bucket_mb": 1},
        "gate": {"tasks": str(tasks), "max_tokens": 4},
        "poll_s": 0.2,
    }
    for key, value in overrides.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) else value
    return parse(data)


def _write_tasks(path: Path, pattern: str) -> None:
    """The gate's held-out tasks: each answer must match ``pattern``."""
    tasks = [
        {"id": f"t{i}", "prompt": prompt, "regex": pattern, "split": "test"}
        for i, prompt in enumerate(HELD_OUT)
    ]
    path.write_text(yaml.safe_dump({"method": "bootstrap", "repeats": 1, "tasks": tasks}))


@pytest.fixture(scope="module")
def shared_engine() -> Iterator[Any]:
    """One torch engine for the tests that do not check its process: each daemon attaches
    and, as with any engine it did not start, reloads its chain's served weights first."""
    from reefd.engine.launch import launch_torch

    engine = launch_torch("tiny", host="127.0.0.1", seed=3)
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture
def daemon(tmp_path: Path, shared_engine: Any) -> Iterator[Daemon]:
    d = Daemon(_config(tmp_path, engine={"url": shared_engine.url})).start()
    try:
        yield d
    finally:
        d.stop()


@pytest.fixture
def own_daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = Daemon(_config(tmp_path)).start()
    try:
        yield d
    finally:
        d.stop()


def _ask(url: str, prompt: str, seed: int, **extra: Any) -> httpx.Response:
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 8,
        "temperature": 1.0,
        "seed": seed,
        **extra,
    }
    resp = httpx.post(url + "/v1/chat/completions", json=body, timeout=60)
    assert resp.status_code == 200, resp.text
    return resp


def _report(url: str, receipt: str, score: float) -> None:
    resp = httpx.post(
        url + "/reef/report", json={"score": score, "references": [receipt]}, timeout=30
    )
    assert resp.status_code in (200, 201), resp.text


def _scored_batch(d: Daemon, n: int = 16, seed: int = 1000) -> int:
    """``n`` sampled answers through the proxy, each reported 1 when it starts with
    printable ASCII, else 0 (a reward the person computes; SAO's baseline is the batch
    mean). Returns how many scored 1."""
    positives = 0
    for i in range(n):
        resp = _ask(d.url, f"question {i}?", seed + i)
        text = resp.json()["choices"][0]["message"]["content"]
        score = 1.0 if PRINTABLE.match(text) else 0.0
        positives += int(score)
        _report(d.url, resp.headers["x-reef-agent-record-id"], score)
    return positives


def _record(d: Daemon, receipt: str) -> Any:
    assert d.flush_records()
    return SQLiteStore().get(receipt)


def test_scored_reports_train_gate_publish_and_swap_with_no_restart(own_daemon: Daemon) -> None:
    from reefd.models import state_checksum

    d = own_daemon
    assert d.tick().state == "waiting"
    engine_pid = d.engine.proc.pid
    base = d.client.checksum()
    assert d.client.weight_version() == "base"
    assert 0 < _scored_batch(d) < 16

    result = d.tick()
    assert result.state == "published", result
    assert result.release == "w1" and result.samples == 16
    assert result.gate["verdict"] == "passed"
    # New weights reached the engine over gloo; the engine process is the same one.
    assert d.engine.proc.pid == engine_pid and d.engine.proc.poll() is None
    assert d.client.weight_version() == "w1"
    trained = d.client.checksum()
    assert trained != base
    assert trained == state_checksum(d.trainer.served_weights())

    # The next record shows the new version, with the engine's token ids.
    resp = _ask(d.url, "echo?", seed=99, stream=False)
    record = _record(d, resp.headers["x-reef-agent-record-id"])
    assert (record.weight_version, record.weight_note) == ("w1", None)
    assert record.token_ids and record.token_ids["response"]
    # A streamed answer is recorded with the version too (and re-tokenized for training).
    with httpx.stream(
        "POST",
        d.url + "/v1/chat/completions",
        json={
            "model": "t",
            "messages": [{"role": "user", "content": "s?"}],
            "stream": True,
            "max_tokens": 4,
        },
        timeout=60,
    ) as streamed:
        receipt = streamed.headers["x-reef-agent-record-id"]
        assert b"[DONE]" in b"".join(streamed.iter_bytes())
    assert _record(d, receipt).weight_version == "w1"

    # The weight chain holds the release: manifest, gate verdict, the trained bytes.
    (release,) = d.chain.releases()
    manifest = d.chain.manifest(release)
    assert release.tag == "w1" and manifest["kind"] == "full"
    assert manifest["metrics"]["samples"] == 16
    assert release.meta.gate["verdict"] == "passed"
    assert state_checksum(d.chain.load(release)) == trained

    # Rollback to the base weights: a new release, swapped in, the old checksum back.
    rolled = d.chain.rollback(0, reason="back to base")
    assert rolled.tag == "w2"
    d.tick()
    assert d.client.weight_version() == "w2"
    assert d.client.checksum() == base
    assert state_checksum(d.trainer.served_weights()) == base
    # ... and forward again to w1.
    d.chain.rollback(1)
    d.tick()
    assert (d.client.weight_version(), d.client.checksum()) == ("w3", trained)
    assert d.engine.proc.pid == engine_pid
    status = json.loads(state.state_file().read_text())
    assert status["engine"]["weight_version"] == "w3" and status["published"] == 1


def test_a_regressing_candidate_is_rejected_and_nothing_swaps(
    daemon: Daemon, tmp_path: Path
) -> None:
    d = daemon
    # Held-out tasks that reward the opposite (answers that do not start with printable
    # ASCII, as the base weights' greedy answers do): the trained candidate regresses.
    _write_tasks(tmp_path / "tasks.yaml", r"^[^ -~]")
    _scored_batch(d)
    before = d.client.checksum()
    weights_before = d.trainer.served_weights()

    result = d.tick()
    assert result.state == "rejected", result
    assert result.gate["verdict"] == "failed"
    assert result.gate["numbers"]["mean_diff"] < 0
    assert d.client.checksum() == before and d.client.weight_version() == "base"
    assert d.chain.releases() == []
    after = d.trainer.served_weights()
    assert all((after[k] == v).all() for k, v in weights_before.items())  # undone
    assert d.tick().state == "waiting"  # the batch was looked at: not trained on again


def test_an_outage_in_the_gate_is_invalid_and_nothing_swaps(
    daemon: Daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = daemon
    _scored_batch(d)
    before = d.client.checksum()
    real = d.trainer.generate
    calls = {"n": 0}

    def flaky(*args: Any, **kwargs: Any) -> str:
        calls["n"] += 1
        if calls["n"] > len(HELD_OUT):  # the served side answered; then the model fails
            raise RuntimeError("out of memory")
        return str(real(*args, **kwargs))

    monkeypatch.setattr(d.trainer, "generate", flaky)
    result = d.tick()
    assert result.state == "invalid", result
    assert "outage" in result.reason
    assert d.client.checksum() == before and d.chain.releases() == []
    monkeypatch.setattr(d.trainer, "generate", real)
    assert d.tick().state == "published"  # the same batch is tried again


def test_a_failed_swap_marks_the_engine_inconsistent_until_reloaded(
    daemon: Daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reef_cli.cli.reefd import _status_text
    from reef_cli.core.errors import EngineInconsistent
    from reefd.models import state_checksum

    d = daemon
    _scored_batch(d)

    def broken(tensors: Any, version: str) -> Any:
        raise EngineInconsistent("the broadcast of bucket 2 of 3 failed: connection reset")

    real_push, real_reload = d.sync.push, d._reload
    monkeypatch.setattr(d.sync, "push", broken)

    def no_disk(*args: Any) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(d, "_reload", no_disk)
    result = d.tick()
    assert result.state == "failed" and "bucket 2" in result.reason
    status = json.loads(state.state_file().read_text())
    assert status["engine"]["consistent"] is False
    assert "bucket 2" in status["engine"]["inconsistent_reason"]
    assert "INCONSISTENT" in _status_text({"running": True, **status})
    # Records served meanwhile cannot train; no update is tried while inconsistent.
    resp = _ask(d.url, "x?", seed=1)
    assert _record(d, resp.headers["x-reef-agent-record-id"]).weight_note == INCONSISTENT
    assert d.tick().state == "inconsistent"
    # Once the served release reloads from disk, the engine serves it and is consistent.
    monkeypatch.setattr(d, "_reload", real_reload)
    monkeypatch.setattr(d.sync, "push", real_push)
    d.tick()
    assert d.weights.consistent and d.client.weight_version() == "w1"
    assert d.client.checksum() == state_checksum(d.trainer.served_weights())


def test_a_broadcast_that_breaks_midway_shows_as_inconsistent_in_reefd_status(
    daemon: Daemon,
) -> None:
    """A real failure, not a stand-in: the daemon pushes over gloo into a fake SGLang that
    drops the connection on the second bucket."""
    from reef_cli.cli.reefd import _status_text
    from reefd.engine.client import EngineClient
    from reefd.sync.dist import DistSync
    from tests.fakes.fake_sglang import FakeSGLang

    d = daemon
    _scored_batch(d)
    with FakeSGLang(group_timeout=10, fail_update_at=2, fail_mode="break") as fake:
        real_sync = d.sync
        d.sync = DistSync(EngineClient(fake.url), backend="gloo", bucket_bytes=64 * 1024)
        try:
            result = d.tick()
        finally:
            d.sync.close()
            d.sync = real_sync
        assert result.state == "failed", result
        calls = fake.endpoints()
        assert calls.index("/init_weights_update_group") < calls.index(
            "/update_weights_from_distributed"
        )
        assert calls.count("/update_weights_from_distributed") == 2  # broke on the second
    status = json.loads(state.state_file().read_text())
    assert status["engine"]["consistent"] is False
    assert "w1" in status["engine"]["inconsistent_reason"]
    assert "INCONSISTENT" in _status_text({"running": True, **status})
    # The next round reloads the published w1 from disk into the real engine.
    d.tick()
    assert d.weights.consistent and d.client.weight_version() == "w1"


def test_an_idle_round_reads_no_records_until_something_changes(
    daemon: Daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = daemon
    calls: list[str] = []
    real_batch = d.recipe.batch

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append("batch")
        return real_batch(*args, **kwargs)

    monkeypatch.setattr(d.recipe, "batch", counted)
    assert d.tick().state == "waiting" and len(calls) == 1
    assert d.tick().state == "waiting" and len(calls) == 1  # nothing new: no scan
    resp = _ask(d.url, "new?", seed=5)
    _report(d.url, resp.headers["x-reef-agent-record-id"], 1.0)
    assert d.flush_records()
    assert d.tick().state == "waiting" and len(calls) == 2  # a new record and report
    assert d.tick().samples == 1 and len(calls) == 2


def test_a_round_leaves_out_its_empty_optional_fields_but_not_a_zero() -> None:
    assert json.dumps(Round("waiting", at="t").to_json()) == (
        '{"state": "waiting", "at": "t", "samples": 0}'
    )

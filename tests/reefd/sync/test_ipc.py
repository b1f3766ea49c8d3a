"""IPC sync: tensor handles that cross processes over HTTP (CPU: file_system shared memory)."""

from __future__ import annotations

import base64
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from reef_cli.core.errors import EngineError, EngineInconsistent  # noqa: E402
from reefd.engine.client import EngineClient  # noqa: E402
from reefd.sync import buckets  # noqa: E402
from reefd.sync.ipc import (  # noqa: E402
    IpcSync,
    deserialize_named_tensors,
    serialize_named_tensors,
    shared_bucket,
)
from tests.fakes.fake_sglang import FakeSGLang  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


def tensors() -> dict[str, Any]:
    g = torch.Generator().manual_seed(1)
    return {
        "a.weight": torch.randn(3, 5, generator=g),
        "b.weight": torch.randn(7, generator=g),
        "c.bf16": torch.randn(4, generator=g).to(torch.bfloat16),
        "d.ids": torch.arange(5),
    }


def test_round_trip_in_process() -> None:
    sent = tensors()
    named = [(n, t.clone()) for n, t in sent.items()]
    got = deserialize_named_tensors(serialize_named_tensors(named))
    assert [n for n, _ in got] == list(sent)
    for (name, t), original in zip(got, sent.values(), strict=True):
        assert t.dtype == original.dtype and torch.equal(t, original), name


def test_handle_maps_in_another_process() -> None:
    """The string alone (what travels in the HTTP body) rebuilds the tensors elsewhere."""
    sent = tensors()
    named = shared_bucket(sent, [buckets.spec_of("a.weight", sent["a.weight"])])
    serialized = serialize_named_tensors(named)
    code = (
        "import sys; from reefd.sync.ipc import deserialize_named_tensors as d\n"
        "[(n, t)] = d(sys.stdin.read())\n"
        "print(n, t.dtype, tuple(t.shape), repr(round(float(t.double().sum()), 6)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code],
        input=serialized,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    ).stdout.split()
    expected = repr(round(float(sent["a.weight"].double().sum()), 6))
    assert out == ["a.weight", "torch.float32", "(3,", "5)", expected]
    del named  # the sender keeps the buffer alive until the engine has answered


def test_shared_bucket_leaves_the_callers_tensors_alone() -> None:
    sent = tensors()
    spec = buckets.spec_of("b.weight", sent["b.weight"])
    [(name, view)] = shared_bucket(sent, [spec])
    assert name == "b.weight" and view.is_shared() and torch.equal(view, sent["b.weight"])
    assert not sent["b.weight"].is_shared()


def test_only_tensor_handles_unpickle() -> None:
    evil = base64.b64encode(pickle.dumps([("x", os.system)])).decode()
    with pytest.raises(ValueError, match=r"posix\.system is not allowed"):
        deserialize_named_tensors(evil)
    with pytest.raises(ValueError, match="not a serialized tensor list"):
        deserialize_named_tensors("not base64!")
    with pytest.raises(ValueError, match="pairs"):
        deserialize_named_tensors(base64.b64encode(pickle.dumps({"x": 1})).decode())


@pytest.fixture
def fake(request: pytest.FixtureRequest) -> Iterator[FakeSGLang]:
    with FakeSGLang(**getattr(request, "param", {})) as engine:
        yield engine


@pytest.mark.parametrize("fake", [{"flush_busy": 1, "tp_size": 2}], indirect=True)
def test_push_order_and_bytes(fake: FakeSGLang) -> None:
    sent = tensors()
    sync = IpcSync(EngineClient(fake.url, flush_wait=0.01), bucket_bytes=32)
    stats = sync.push(sent, "w1")
    plan = buckets.plan([buckets.spec_of(n, t) for n, t in sent.items()], 32)
    assert fake.endpoints() == [
        "/server_info",
        *["/update_weights_from_tensor"] * len(plan),
        "/flush_cache",
        "/flush_cache",
    ]
    bodies = [c.body for c in fake.calls if c.endpoint == "/update_weights_from_tensor"]
    assert [b["weight_version"] for b in bodies] == [None] * (len(plan) - 1) + ["w1"]
    assert all(len(b["serialized_named_tensors"]) == 2 for b in bodies)  # one per TP rank
    assert [b["flush_cache"] for b in bodies] == [False] * (len(plan) - 1) + [True]
    assert all(b["load_format"] is None for b in bodies)
    for name, t in sent.items():
        assert torch.equal(fake.received[name], t), name
    assert fake.weight_version == "w1"
    assert (stats.mode, stats.buckets) == ("ipc", len(plan))


@pytest.mark.parametrize("fake", [{"fail_update_at": 2}], indirect=True)
def test_failure_midway_is_inconsistent(fake: FakeSGLang) -> None:
    with pytest.raises(EngineInconsistent, match="w1"):
        IpcSync(EngineClient(fake.url), bucket_bytes=32).push(tensors(), "w1")
    assert fake.weight_version == "base"


def test_unreachable_is_an_engine_error() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(EngineError) as caught:
        IpcSync(EngineClient(f"http://127.0.0.1:{port}")).push(tensors(), "w1")
    assert not isinstance(caught.value, EngineInconsistent)

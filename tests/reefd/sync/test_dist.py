"""DistSync against the fake SGLang server: a real gloo group over loopback TCP."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from reef_cli.core.errors import EngineError, EngineInconsistent  # noqa: E402
from reefd.engine.client import EngineClient  # noqa: E402
from reefd.sync import buckets  # noqa: E402
from reefd.sync.dist import DistSync  # noqa: E402
from tests.fakes.fake_sglang import FakeSGLang  # noqa: E402

UPDATE = "/update_weights_from_distributed"


def tensors() -> dict[str, Any]:
    g = torch.Generator().manual_seed(0)
    return {
        "layers.0.w": torch.randn(4, 4, generator=g),
        "layers.0.b": torch.randn(8, generator=g),
        "layers.1.w": torch.randn(2, 8, generator=g),
        "norm.bf16": torch.randn(6, generator=g).to(torch.bfloat16),
        "step": torch.arange(6).reshape(2, 3),
    }


@pytest.fixture
def fake(request: pytest.FixtureRequest) -> Iterator[FakeSGLang]:
    options = getattr(request, "param", {})
    with FakeSGLang(group_timeout=10, **options) as engine:
        yield engine


def sync_for(fake: FakeSGLang, **options: Any) -> DistSync:
    client = EngineClient(fake.url, timeout=20, flush_wait=0.01)
    return DistSync(client, bucket_bytes=64, timeout=10, **options)


def assert_received(fake: FakeSGLang, sent: dict[str, Any]) -> None:
    assert set(fake.received) == set(sent)
    for name, t in sent.items():
        got = fake.received[name]
        assert got.dtype == t.dtype and tuple(got.shape) == tuple(t.shape)
        assert (
            got.contiguous().view(torch.uint8).tolist() == t.contiguous().view(torch.uint8).tolist()
        ), name


@pytest.mark.parametrize("fake", [{"flush_busy": 2}], indirect=True)
def test_order_and_fields(fake: FakeSGLang) -> None:
    sent = tensors()
    sync = sync_for(fake)
    plan = buckets.plan([buckets.spec_of(n, t) for n, t in sent.items()], 64)
    assert len(plan) >= 3

    stats = sync.push(sent, "w1")
    sync.close()

    n = len(plan)
    assert fake.endpoints() == [
        "/server_info",
        "/init_weights_update_group",
        "/pause_generation",  # no generation on half-updated weights between buckets
        *[UPDATE] * n,
        "/continue_generation",
        "/flush_cache",  # 400
        "/flush_cache",  # 400
        "/flush_cache",  # 200
        "/destroy_weights_update_group",
    ]
    init = fake.calls[1].body
    assert init["master_address"] == "127.0.0.1"
    assert isinstance(init["master_port"], int) and init["master_port"] > 0
    assert (init["rank_offset"], init["world_size"], init["backend"]) == (1, 2, "gloo")
    group_name = init["group_name"]
    updates = [c.body for c in fake.calls if c.endpoint == UPDATE]
    for body, bucket in zip(updates, plan, strict=True):
        assert body["names"] == [s.name for s in bucket]
        assert body["dtypes"] == [s.dtype for s in bucket]
        assert body["shapes"] == [list(s.shape) for s in bucket]
        assert body["group_name"] == group_name
        assert body["load_format"] == "flattened_bucket"
    assert [b["weight_version"] for b in updates] == [None] * (n - 1) + ["w1"]
    assert [b["flush_cache"] for b in updates] == [False] * (n - 1) + [True]
    assert fake.calls[-1].body == {"group_name": group_name}

    # Each broadcast was received inside its own request, one bucket after the other.
    steps = [e for e in fake.events if e[0] in ("received",) or (len(e) > 1 and e[1] == UPDATE)]
    expected: list[tuple[Any, ...]] = []
    for bucket in plan:
        nbytes = sum(s.nbytes() for s in bucket)
        expected += [("request", UPDATE), ("received", nbytes), ("answer", UPDATE, 200)]
    assert steps == expected
    joined = fake.events.index(("joined", 1))
    assert fake.events.index(("request", "/init_weights_update_group")) < joined
    assert joined < fake.events.index(("answer", "/init_weights_update_group", 200))

    assert_received(fake, sent)
    assert fake.weight_version == "w1"
    assert (stats.mode, stats.buckets) == ("dist", n)
    assert stats.bytes == sum(t.numel() * t.element_size() for t in sent.values())


def test_second_push_reuses_the_group(fake: FakeSGLang) -> None:
    sync = sync_for(fake)
    sync.push(tensors(), "w1")
    changed = {k: v + 1 for k, v in tensors().items()}
    sync.push(changed, "w2")
    sync.close()
    assert fake.endpoints().count("/init_weights_update_group") == 1
    assert_received(fake, changed)
    assert fake.weight_version == "w2"


@pytest.mark.parametrize("fake", [{"tp_size": 2}], indirect=True)
def test_world_size_counts_every_engine_rank(fake: FakeSGLang) -> None:
    sync = sync_for(fake)
    sync.push(tensors(), "w1")
    sync.close()
    assert fake.calls[1].body["world_size"] == 3
    assert ("joined", 1) in fake.events and ("joined", 2) in fake.events
    assert_received(fake, tensors())


def test_one_broadcast_per_tensor_without_flattening(fake: FakeSGLang) -> None:
    sync = sync_for(fake, load_format=None)
    sync.push(tensors(), "w1")
    sync.close()
    assert {c.body["load_format"] for c in fake.calls if c.endpoint == UPDATE} == {None}
    assert_received(fake, tensors())


@pytest.mark.parametrize(
    "fake",
    [
        {"fail_update_at": 2, "fail_mode": "refuse"},
        {"fail_update_at": 2, "fail_mode": "error"},
        {"fail_update_at": 2, "fail_mode": "break"},
    ],
    indirect=True,
    ids=["refuse", "error", "break"],
)
def test_failure_midway_is_inconsistent(fake: FakeSGLang) -> None:
    sync = sync_for(fake)
    started = time.monotonic()
    with pytest.raises(EngineInconsistent) as caught:
        sync.push(tensors(), "w1")
    assert time.monotonic() - started < 8  # a broken peer fails fast, not at the timeout
    assert "w1" in caught.value.message and "\n" not in caught.value.one_line()
    assert not sync.connected
    assert fake.weight_version == "base"
    assert fake.endpoints().count(UPDATE) == 2
    assert "/flush_cache" not in fake.endpoints()
    assert fake.endpoints()[-1] == "/destroy_weights_update_group"

    # The next push forms a new group (a new name) and completes.
    sync.push(tensors(), "w2")
    sync.close()
    inits = [c.body["group_name"] for c in fake.calls if c.endpoint == "/init_weights_update_group"]
    assert inits == ["reef-weights", "reef-weights-2"]
    assert_received(fake, tensors())
    assert fake.weight_version == "w2"


@pytest.mark.parametrize("fake", [{"names": {"layers.0.w", "layers.0.b"}}], indirect=True)
def test_unknown_name_is_inconsistent(fake: FakeSGLang) -> None:
    with pytest.raises(EngineInconsistent, match=r"no layers\.1\.w"):
        sync_for(fake).push(tensors(), "w1")


@pytest.mark.parametrize("fake", [{"flush_busy": 100}], indirect=True)
def test_a_flush_that_stays_busy_is_only_a_warning(
    fake: FakeSGLang, caplog: pytest.LogCaptureFixture
) -> None:
    """The weights are in (the last update asked the engine to flush under its lock)."""
    sync = DistSync(EngineClient(fake.url, flush_retries=2, flush_wait=0.01), bucket_bytes=64)
    sync.push(tensors(), "w1")
    sync.close()
    assert fake.endpoints().count("/flush_cache") == 3
    assert fake.weight_version == "w1"
    assert "/flush_cache still busy after 3 tries" in caplog.text


@pytest.mark.parametrize("fake", [{"fail_init": True}], indirect=True)
def test_refused_group_is_an_engine_error_and_fast(fake: FakeSGLang) -> None:
    sync = sync_for(fake)
    started = time.monotonic()
    with pytest.raises(EngineError) as caught:
        sync.push(tensors(), "w1")
    assert not isinstance(caught.value, EngineInconsistent)
    assert time.monotonic() - started < 5  # not the 10 s join timeout
    assert "/init_weights_update_group" in caught.value.message
    assert UPDATE not in fake.endpoints()


def test_unreachable_engine_is_an_engine_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sync = DistSync(EngineClient(f"http://127.0.0.1:{port}", timeout=2), timeout=2)
    with pytest.raises(EngineError) as caught:
        sync.push(tensors(), "w1")
    assert not isinstance(caught.value, EngineInconsistent)
    assert "/server_info" in caught.value.message
    sync.close()  # nothing to close: no error


def test_nothing_to_push_is_an_engine_error(fake: FakeSGLang) -> None:
    with pytest.raises(EngineError, match="no tensors"):
        sync_for(fake).push({}, "w1")
    assert fake.endpoints() == []


def test_against_reefds_torch_engine() -> None:
    """The same push into the built-in engine: it reports the pushed tensors' checksum."""
    from reef_cli.server.thread import ServerThread
    from reefd import models
    from reefd.engine.torch_server import create_engine_app

    loaded = models.load("tiny", seed=0)
    sent = {name: torch.randn_like(t) for name, t in models.param_map(loaded.model).items()}
    srv = ServerThread(create_engine_app(loaded, group_timeout=10))
    srv.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # see fake_sglang.py
    with srv:
        client = EngineClient(srv.url, flush_wait=0.01)
        before = client.checksum()
        sync = DistSync(client, bucket_bytes=128 * 1024, timeout=10)
        stats = sync.push(sent, "w1")
        sync.close()
        assert stats.buckets > 1
        assert client.weight_version() == "w1"
        assert client.checksum() == models.state_checksum(sent) != before


def test_packed_weights_travel_with_no_copy_at_either_end() -> None:
    """Packed trainer weights are broadcast from their own memory, and the torch engine
    receives each bucket straight into its weights (their storage does not move)."""
    from reef_cli.server.thread import ServerThread
    from reefd import models
    from reefd.engine.torch_server import create_engine_app

    loaded = models.load("tiny", seed=0)
    sent = buckets.pack(
        {name: torch.randn_like(t) for name, t in models.param_map(loaded.model).items()}
    )
    app = create_engine_app(loaded, group_timeout=10)
    where = {n: t.data_ptr() for n, t in models.param_map(loaded.model).items()}
    with ServerThread(app) as srv:
        client = EngineClient(srv.url, flush_wait=0.01)
        sync = DistSync(client, bucket_bytes=128 * 1024, timeout=10)
        staged: list[Any] = []
        real_stage = sync._stage
        sync._stage = lambda *a: staged.append(a) or real_stage(*a)  # type: ignore[method-assign]
        sync.push(sent, "w1")
        sync.close()
        assert staged == []  # every bucket went out as a span of the packed buffers
        assert client.checksum() == models.state_checksum(sent)
    after = models.param_map(loaded.model)
    assert {n: t.data_ptr() for n, t in after.items()} == where  # received in place
    assert all(torch.equal(after[n], sent[n]) for n in sent)

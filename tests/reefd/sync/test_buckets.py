"""Bucket planning and the flat layout both ends of a broadcast agree on."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from reefd.sync import buckets  # noqa: E402
from reefd.sync.buckets import TensorSpec  # noqa: E402


def specs() -> list[TensorSpec]:
    return [
        TensorSpec("b", "float32", (4,)),  # 16 bytes
        TensorSpec("a", "float32", (2, 2)),  # 16
        TensorSpec("c", "bfloat16", (8,)),  # 16
        TensorSpec("d", "float32", (10,)),  # 40: bigger than a bucket
        TensorSpec("e", "float32", (1,)),  # 4
    ]


def test_plan_one_dtype_per_bucket_in_name_order_within_the_limit() -> None:
    plan = buckets.plan(specs(), bucket_bytes=32)
    assert [[s.name for s in b] for b in plan] == [["a", "b"], ["c"], ["d"], ["e"]]
    for bucket in plan:
        assert len({s.dtype for s in bucket}) == 1
        assert sum(s.nbytes() for s in bucket) <= 32 or len(bucket) == 1
    assert sorted(s.name for b in plan for s in b) == ["a", "b", "c", "d", "e"]


def test_plan_one_bucket_when_it_fits() -> None:
    plan = buckets.plan(specs(), bucket_bytes=1 << 20)
    assert [[s.name for s in b] for b in plan] == [["a", "b", "d", "e"], ["c"]]


def test_flatten_allocate_unflatten_round_trip() -> None:
    tensors = {
        "a": torch.arange(4.0).reshape(2, 2),
        "b": torch.arange(4.0, 8.0),
        "t": torch.arange(6.0).reshape(2, 3).t(),  # not contiguous
    }
    bucket = [buckets.spec_of(n, tensors[n]) for n in ("a", "b", "t")]
    flat = buckets.flatten(tensors, bucket)
    into = buckets.allocate(bucket)
    assert into.shape == flat.shape and into.dtype == flat.dtype
    into.copy_(flat)
    back = buckets.unflatten(into, bucket)
    for name, t in tensors.items():
        assert torch.equal(back[name], t), name
    with pytest.raises(ValueError, match="size mismatch"):
        buckets.unflatten(torch.zeros(15), bucket)


def test_the_wire_bytes_are_sglangs_flattened_bucket() -> None:
    """SGLang's receiver cats each tensor's uint8 view in name order: the same bytes as
    a uint8 view of reefd's flat bucket."""
    tensors = {"a": torch.randn(3, 2), "b": torch.randn(5)}
    bucket = [buckets.spec_of(n, tensors[n]) for n in ("a", "b")]
    sglang = torch.cat([tensors[n].flatten().view(torch.uint8) for n in ("a", "b")])
    assert torch.equal(buckets.flatten(tensors, bucket).view(torch.uint8), sglang)


def test_specs_from_request() -> None:
    got = buckets.specs_from_request(["a", "b"], ["float32", "bfloat16"], [[2, 3], [4]])
    assert got == [TensorSpec("a", "float32", (2, 3)), TensorSpec("b", "bfloat16", (4,))]
    with pytest.raises(ValueError):
        buckets.specs_from_request(["a"], ["float32", "float32"], [[1]])
    with pytest.raises(ValueError):
        buckets.specs_from_request([], [], [])
    with pytest.raises(ValueError, match="unknown tensor dtype"):
        buckets.allocate(buckets.specs_from_request(["a"], ["nope"], [[1]]))


def test_pack_lays_every_bucket_out_as_one_span() -> None:
    g = torch.Generator().manual_seed(1)
    loose = {
        "b": torch.randn(3, 4, generator=g),
        "a": torch.randn(5, generator=g),
        "c": torch.randn(2, generator=g).to(torch.bfloat16),
        "d": torch.randn(7, generator=g),
    }
    packed = buckets.pack(loose)
    assert list(packed) == list(loose)  # the caller's order; the layout is by name
    assert all(torch.equal(packed[k], loose[k]) for k in loose)
    plan = buckets.plan([buckets.spec_of(n, t) for n, t in packed.items()], 1 << 20)
    assert [[s.name for s in b] for b in plan] == [["a", "b", "d"], ["c"]]
    for bucket in plan:
        span = buckets.span(packed, bucket)
        assert span is not None and span.dtype == torch.uint8
        assert torch.equal(span, buckets.flatten(packed, bucket).view(torch.uint8))
    # A span is the tensors' own memory: writing it writes them (an in-place receive).
    buckets.span(packed, plan[0]).zero_()
    assert packed["a"].abs().sum() == 0 and packed["b"].abs().sum() == 0
    # Loose tensors, or a bucket out of layout order, have no span.
    assert buckets.span(loose, plan[0]) is None
    shuffled = [plan[0][1], plan[0][0]]
    assert buckets.span(packed, shuffled) is None

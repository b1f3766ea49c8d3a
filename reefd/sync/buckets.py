"""Bucket layout shared by both ends of a weight update.

The sender cuts the named tensors into buckets of one dtype and at most ``bucket_bytes``
each (a tensor larger than that goes alone), in name order; each bucket travels as one
flat tensor (``flatten``), and the receiver, told the names, dtypes and shapes of the
bucket, allocates that flat tensor and cuts it back (``unflatten``). One broadcast per
bucket instead of one per tensor: a model has hundreds of small tensors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reefd._torch import require

# Big buckets: each costs one update request and one broadcast set-up (measured ~4 ms on
# the torch engine), and with packed weights at both ends (``pack``) a bucket needs no
# buffer of its size anywhere; only a fallback path (unpacked tensors) stages one.
DEFAULT_BUCKET_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str  # torch dtype name without "torch.": float32, bfloat16, ...
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        n = 1
        for dim in self.shape:
            n *= int(dim)
        return n

    def nbytes(self) -> int:
        torch = require()
        return self.numel * _dtype(torch, self.dtype).itemsize


def dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def torch_dtype(name: str) -> Any:
    """``"bfloat16"`` -> ``torch.bfloat16`` (ValueError for anything else)."""
    return _dtype(require(), name)


def _dtype(torch: Any, name: str) -> Any:
    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown tensor dtype {name!r}")
    return value


def spec_of(name: str, tensor: Any) -> TensorSpec:
    return TensorSpec(name, dtype_name(tensor.dtype), tuple(int(d) for d in tensor.shape))


def plan(
    specs: Iterable[TensorSpec], bucket_bytes: int = DEFAULT_BUCKET_BYTES
) -> list[list[TensorSpec]]:
    """Buckets of one dtype each, at most ``bucket_bytes`` (a bigger tensor goes alone)."""
    buckets: list[list[TensorSpec]] = []
    open_: dict[str, tuple[list[TensorSpec], int]] = {}
    for spec in sorted(specs, key=lambda s: s.name):
        size = spec.nbytes()
        current = open_.get(spec.dtype)
        if current is not None and current[1] + size <= bucket_bytes:
            current[0].append(spec)
            open_[spec.dtype] = (current[0], current[1] + size)
            continue
        bucket = [spec]
        buckets.append(bucket)
        open_[spec.dtype] = (bucket, size)
    return buckets


def flatten(tensors: Mapping[str, Any], bucket: Sequence[TensorSpec]) -> Any:
    """The bucket's tensors as one flat contiguous tensor of their dtype."""
    torch = require()
    parts = [tensors[spec.name].detach().reshape(-1) for spec in bucket]
    return parts[0].contiguous() if len(parts) == 1 else torch.cat(parts)


def allocate(bucket: Sequence[TensorSpec], device: Any = "cpu") -> Any:
    """The empty flat tensor a receiver broadcasts into."""
    torch = require()
    total = sum(spec.numel for spec in bucket)
    return torch.empty(total, dtype=_dtype(torch, bucket[0].dtype), device=device)


def unflatten(flat: Any, bucket: Sequence[TensorSpec]) -> dict[str, Any]:
    """Cut a received flat tensor back into ``{name: tensor}`` (views, no copy)."""
    out: dict[str, Any] = {}
    offset = 0
    for spec in bucket:
        out[spec.name] = flat[offset : offset + spec.numel].view(spec.shape)
        offset += spec.numel
    if offset != flat.numel():
        raise ValueError(f"bucket size mismatch: specs cover {offset}, got {flat.numel()}")
    return out


def pack(tensors: Mapping[str, Any]) -> dict[str, Any]:
    """Copies of ``tensors`` laid out in one flat buffer per dtype, in name order: the
    order ``plan`` cuts buckets in, so every bucket is one contiguous span (``span``)
    and a push broadcasts it with no staging copy. Returns views, in the input's order."""
    torch = require()
    groups: dict[str, list[str]] = {}
    for name in sorted(tensors):
        groups.setdefault(dtype_name(tensors[name].dtype), []).append(name)
    out: dict[str, Any] = {}
    for names in groups.values():
        first = tensors[names[0]]
        total = sum(int(tensors[n].numel()) for n in names)
        flat = torch.empty(total, dtype=first.dtype, device=first.device)
        offset = 0
        for name in names:
            t = tensors[name].detach()
            n = int(t.numel())
            view = flat[offset : offset + n]
            view.copy_(t.reshape(-1))
            out[name] = view.view(t.shape)
            offset += n
    return {name: out[name] for name in tensors}


def span(tensors: Mapping[str, Any], bucket: Sequence[TensorSpec]) -> Any | None:
    """The bucket's bytes as one uint8 view when its tensors lie back to back in one
    storage, in bucket order (``pack``, or an engine's packed parameters); else None."""
    torch = require()
    parts = [tensors[spec.name] for spec in bucket]
    first = parts[0]
    storage = first.untyped_storage()
    expected = first.data_ptr()
    for part in parts:
        if (
            not part.is_contiguous()
            or part.untyped_storage().data_ptr() != storage.data_ptr()
            or part.data_ptr() != expected
        ):
            return None
        expected += part.numel() * part.element_size()
    nbytes = expected - first.data_ptr()
    start = first.data_ptr() - storage.data_ptr()
    flat = torch.empty(0, dtype=torch.uint8, device=first.device)
    return flat.set_(storage, start, (nbytes,), (1,))


def specs_from_request(
    names: Sequence[str], dtypes: Sequence[str], shapes: Sequence[Sequence[int]]
) -> list[TensorSpec]:
    """The bucket an ``/update_weights_from_distributed`` request describes."""
    if not (len(names) == len(dtypes) == len(shapes)) or not names:
        raise ValueError("names, dtypes and shapes must be non-empty lists of one length")
    return [
        TensorSpec(n, d, tuple(int(x) for x in s))
        for n, d, s in zip(names, dtypes, shapes, strict=True)
    ]

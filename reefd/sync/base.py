"""What every weight sync is: push a named tensor set into a running engine, as a version.

Four ways (``mode``): ``dist`` (a torch.distributed broadcast, gloo or nccl), ``ipc``
(shared memory / CUDA IPC handles over HTTP), ``disk`` (a safetensors file the engine
reads) and ``lora`` (a peft adapter directory). All four share one failure rule, which
the daemon relies on: a failure before anything reached the engine raises
``EngineError`` (the engine still serves what it served); a failure after the engine may
have applied part of the update raises ``EngineInconsistent`` (its weights are neither
old nor new until the served release is reloaded from disk).
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from reef_cli.core.errors import ConfigError, EngineError, EngineInconsistent, ReefError

if TYPE_CHECKING:
    from reefd.engine.client import EngineClient

log = logging.getLogger(__name__)
RELOAD_HINT = (
    "the engine's weights are mixed: reload the served weight release from disk "
    "(reefd does so before it trains or swaps again)"
)
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass
class SyncStats:
    mode: str
    bytes: int
    seconds: float
    buckets: int

    @property
    def gb_per_s(self) -> float:
        return self.bytes / 1e9 / self.seconds if self.seconds > 0 else 0.0


class WeightSync(Protocol):
    mode: str

    def push(self, tensors: Mapping[str, Any], version: str) -> SyncStats: ...

    def close(self) -> None: ...


def reason(exc: BaseException) -> str:
    """One line for any exception: a ReefError's message, else type and text."""
    text = exc.message if isinstance(exc, ReefError) else f"{type(exc).__name__}: {exc}"
    line = " ".join(str(text).split())
    return line if len(line) <= 300 else line[:299] + "…"


def failed(mode: str, version: str, exc: BaseException, *, reached: bool) -> EngineError:
    """The error a push raises: inconsistent once the engine may hold part of it."""
    if reached:
        return EngineInconsistent(
            f"weight update to {version} ({mode}) failed midway: {reason(exc)}", RELOAD_HINT
        )
    if isinstance(exc, EngineError) and not isinstance(exc, EngineInconsistent):
        return EngineError(
            f"weight update to {version} ({mode}) not started: {exc.message}", exc.hint
        )
    return EngineError(f"weight update to {version} ({mode}) not started: {reason(exc)}")


@dataclass
class Attempt:
    """One push under way: set ``reached`` once the engine may hold part of it."""

    mode: str
    started: float = field(default_factory=time.perf_counter)
    reached: bool = False

    def stats(self, nbytes: int, buckets: int) -> SyncStats:
        return SyncStats(self.mode, nbytes, time.perf_counter() - self.started, buckets)


@contextlib.contextmanager
def attempt(mode: str, version: str, tensors: Mapping[str, Any]) -> Iterator[Attempt]:
    """The frame every push shares: an empty tensor set is refused, and any failure inside
    becomes ``failed(...)`` (``EngineInconsistent`` once ``reached`` is set)."""
    push = Attempt(mode)
    try:
        if not tensors:
            raise EngineError("no tensors to push")
        yield push
    except Exception as exc:
        raise failed(mode, version, exc, reached=push.reached) from exc


def version_dir(work_dir: Path, version: str) -> Path:
    """``work_dir/<version>``; a version is a plain name (``base``, ``w3``), never a path."""
    if not _VERSION.fullmatch(version):
        raise ConfigError(f"weight version {version!r} is not a plain name like w3")
    return work_dir / version


def total_bytes(tensors: Mapping[str, Any]) -> int:
    return sum(int(t.numel()) * int(t.element_size()) for t in tensors.values())


def flush(client: EngineClient) -> None:
    """The cache flush after an update, retried while the engine is busy (400).

    Not a failure when it stays busy: the update itself asked the engine to flush
    (``flush_cache`` on its last request), which SGLang does under its update lock, with
    no generation running; this second flush only covers an engine that ignores it, and
    under steady traffic it may never find the engine idle."""
    try:
        client.flush_cache()
    except EngineError as exc:
        log.warning("cache not flushed after the weight update: %s", exc.message)

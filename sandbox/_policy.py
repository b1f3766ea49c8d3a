"""The policy a sandboxed run is given and the result it returns, as plain dataclasses.

Kept free of any process code so recipes can build and store policies cheaply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from reef_cli.core.errors import SandboxError

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
TMP_SHARE = 4  # default /tmp cap: a quarter of the memory limit
TMP_MIN_MB = 64


@dataclass(frozen=True)
class Limits:
    """Resource limits; ``None`` switches one off.

    ``memory_mb`` becomes RLIMIT_AS, which breaks Node (V8 reserves huge address space):
    for Node agents use ``Limits.for_node()``, which caps the V8 heap instead.
    ``pids`` is RLIMIT_NPROC for the sandbox's host uid (never enforced for root, which is
    why a root caller's sandbox runs as an unprivileged uid).
    ``tmp_mb`` caps the sandbox's private RAM-backed storage - ``/tmp``, ``/var/tmp`` and
    ``/dev/shm`` share one tmpfs - which RLIMIT_AS does not count; ``None`` means a quarter
    of the memory limit (``memory_mb``, else ``node_heap_mb``), at least 64 MiB. It cannot
    be switched off: a run's RAM is at most its memory limit plus ``tmp_mb``.
    """

    wall_s: float | None = 600.0
    cpu_s: int | None = None
    memory_mb: int | None = 4096
    node_heap_mb: int | None = None
    file_mb: int | None = 1024
    pids: int | None = 256
    open_files: int | None = 1024
    tmp_mb: int | None = None

    def __post_init__(self) -> None:
        if self.tmp_mb is not None and int(self.tmp_mb) < 1:
            raise SandboxError(
                f"tmp_mb={self.tmp_mb}: the sandbox /tmp needs at least 1 MiB",
                "pass tmp_mb >= 1, or None for a share of the memory limit",
            )

    @property
    def tmp_cap_mb(self) -> int:
        """The /tmp cap in MiB this run gets (``tmp_mb``, or its default share)."""
        if self.tmp_mb is not None:
            return int(self.tmp_mb)
        base = self.memory_mb if self.memory_mb is not None else self.node_heap_mb
        return max(TMP_MIN_MB, int(base if base is not None else 4096) // TMP_SHARE)

    @classmethod
    def for_node(cls, heap_mb: int = 2048, **kw: object) -> Limits:
        """Limits for a Node process: no RLIMIT_AS, a V8 heap cap instead."""
        return cls(memory_mb=None, node_heap_mb=heap_mb, **kw)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Policy:
    """What a sandboxed command may touch.

    ``allow``: loopback (host, port) pairs the command may connect to; nothing else is
    reachable. ``ro_binds``: extra host paths visible read-only at the same place.
    ``env``: the whole environment besides PATH/HOME/LANG/TMPDIR (the parent's is never
    passed). ``home``: a host dir to mount as HOME (default: a fresh empty one).
    """

    allow: tuple[tuple[str, int], ...] = ()
    ro_binds: tuple[Path, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    home: Path | None = None

    @classmethod
    def make(
        cls,
        allow: Sequence[tuple[str, int]] = (),
        ro_binds: Sequence[str | Path] = (),
        env: Mapping[str, str] | None = None,
        limits: Limits | None = None,
        home: str | Path | None = None,
    ) -> Policy:
        """Build and validate a policy from loose arguments."""
        pairs: list[tuple[str, int]] = []
        for host, port in allow:
            if host not in LOOPBACK_HOSTS:
                raise SandboxError(
                    f"cannot allow {host}:{port}: only loopback ports can be opened",
                    "point the agent at the local Reef gateway (127.0.0.1:PORT)",
                )
            if not 0 < int(port) < 65536:
                raise SandboxError(f"bad port {port}", "use a TCP port between 1 and 65535")
            pairs.append((host, int(port)))
        binds = tuple(Path(p).absolute() for p in ro_binds)
        for b in binds:
            if not b.exists():
                raise SandboxError(f"read-only bind {b} does not exist", "pass an existing path")
        for key in env or {}:
            if not key or "=" in key:
                raise SandboxError(f"bad environment variable name {key!r}", "use NAME=value")
        return cls(
            allow=tuple(pairs),
            ro_binds=binds,
            env=dict(env or {}),
            limits=limits or Limits(),
            home=Path(home).absolute() if home is not None else None,
        )

    @property
    def ports(self) -> list[int]:
        return sorted({port for _, port in self.allow})


@dataclass(frozen=True)
class Result:
    """What a run returned. ``killed_by``: ``wall``, ``cpu``, ``file_size`` or ``signal:NAME``.

    ``workdir`` is where the command ran: the given dir, or in ``none`` mode the throwaway
    copy (left for the caller to inspect; it lives under the temp dir).
    """

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    killed_by: str | None
    mode: str
    duration_s: float
    workdir: Path

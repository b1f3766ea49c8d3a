"""Issue 11, item 2: the sandbox's RAM-backed /tmp is capped (a Limits field), so a run
cannot fill host memory through it."""

from __future__ import annotations

from pathlib import Path

import pytest

import sandbox
from reef_cli.core.errors import SandboxError
from sandbox import Limits

from .conftest import needs_bwrap


def test_default_cap_is_a_share_of_the_memory_limit() -> None:
    assert Limits().tmp_cap_mb == 1024  # a quarter of the default 4096 MiB
    assert Limits(memory_mb=512).tmp_cap_mb == 128
    assert Limits.for_node(heap_mb=1024).tmp_cap_mb == 256
    assert Limits(memory_mb=100).tmp_cap_mb == 64  # floor
    assert Limits(memory_mb=None).tmp_cap_mb == 1024  # no memory limit: never uncapped
    assert Limits(tmp_mb=7).tmp_cap_mb == 7


@pytest.mark.parametrize("bad", [0, -1])
def test_the_cap_cannot_be_switched_off(bad: int) -> None:
    # tmpfs size=0 would mean "no limit"
    with pytest.raises(SandboxError, match="tmp_mb"):
        Limits(tmp_mb=bad)


@needs_bwrap
def test_writing_past_the_cap_fails_inside_and_under_it_works(work: Path) -> None:
    script = (
        "dd if=/dev/zero of=/tmp/a bs=1M count=10 2>/dev/null && echo first-ok; "
        # /var/tmp is the same tmpfs: together they pass 16 MiB
        "dd if=/dev/zero of=/var/tmp/b bs=1M count=10 2>&1 | grep -o 'No space left on device'; "
        "stat -f -c 'blocks=%b bsize=%S' /tmp"
    )
    res = sandbox.run(["sh", "-c", script], work, limits=Limits(tmp_mb=16, file_mb=64))
    assert res.returncode == 0, res.stderr
    assert "first-ok" in res.stdout, res.stdout
    assert "No space left on device" in res.stdout, res.stdout
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("blocks="))
    size = dict(kv.split("=") for kv in line.split())
    assert int(size["blocks"]) * int(size["bsize"]) == 16 << 20


@needs_bwrap
def test_default_cap_applies_without_a_tmp_limit(work: Path) -> None:
    res = sandbox.run(["stat", "-f", "-c", "%b %S", "/tmp"], work, limits=Limits(memory_mb=256))
    blocks, bsize = map(int, res.stdout.split())
    assert blocks * bsize == 64 << 20

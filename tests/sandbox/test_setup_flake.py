"""bwrap failing to bring up the sandbox's loopback (before it ran anything) is tried once
more; a command's own failure is never re-run."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox._bwrap import _setup_flaked
from sandbox._policy import Result


def result(rc: int, stderr: str, stdout: str = "") -> Result:
    return Result(rc, stdout, stderr, False, None, "bwrap", 0.1, Path("/tmp"))


@pytest.mark.parametrize(
    ("rc", "stderr", "stdout", "again"),
    [
        (1, "bwrap: loopback: Failed RTM_NEWADDR: No child processes\n", "", True),
        (1, "bwrap: loopback: Failed RTM_NEWADDR: No child processes\n", "ran\n", False),
        (1, "some test failed\nbwrap: loopback: x\n", "", False),
        (2, "bwrap: loopback: Failed RTM_NEWADDR\n", "", False),
        (1, "bwrap: execvp node: No such file or directory\n", "", False),
        (0, "", "fine\n", False),
    ],
)
def test_only_the_loopback_setup_failure_is_retried(rc, stderr, stdout, again) -> None:
    assert _setup_flaked(result(rc, stderr, stdout)) is again

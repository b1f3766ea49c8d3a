"""Every test gets its own empty state dir (REEF_HOME) and no REEF_* settings from outside."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def reef_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in list(os.environ):
        if key.startswith("REEF_"):
            monkeypatch.delenv(key)
    home = tmp_path / "reef-home"
    monkeypatch.setenv("REEF_HOME", str(home))
    return home

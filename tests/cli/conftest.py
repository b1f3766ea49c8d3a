from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import reef


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Scenario ``demo`` and a starter tree from `reef harness init` in ``tmp_path/tree``."""
    reef("scenario", "create", "demo")
    root = tmp_path / "tree"
    reef("harness", "init", str(root))
    return root

from __future__ import annotations

from pathlib import Path

import pytest

from reef_cli.core import scenarios
from reef_cli.core.errors import InvalidName, ScenarioExists, ScenarioNotFound
from reef_cli.core.publishing import publish_files
from reef_cli.core.tree import starter_tree


def test_create_list_get(reef_home: Path) -> None:
    scenarios.create("alpha", "first")
    scenarios.create("beta")
    assert [s.name for s in scenarios.list_all()] == ["alpha", "beta"]
    assert scenarios.get("alpha").description == "first"
    with pytest.raises(ScenarioExists):
        scenarios.create("alpha")
    assert not [p for p in (reef_home / "scenarios").iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("bad", ["Alpha", "a_b", "-a", "a--b", "", "a" * 65, "../x"])
def test_bad_names(bad: str) -> None:
    with pytest.raises(InvalidName, match="kebab-case"):
        scenarios.create(bad)


def test_unknown_scenario_names_the_fix() -> None:
    with pytest.raises(ScenarioNotFound) as info:
        scenarios.get("ghost")
    assert "reef scenario create ghost" in info.value.one_line()


def test_delete_archives_and_restore_brings_back_the_chain() -> None:
    scenarios.create("gamma")
    publish_files("gamma", starter_tree().files(), reason="r1")
    archived = scenarios.delete("gamma")
    assert archived.exists() and (archived / "chain.git").is_dir()
    with pytest.raises(ScenarioNotFound):
        scenarios.get("gamma")
    restored = scenarios.restore(archived.name)
    assert restored.chain().latest().number == 1

"""bench/draft_asks.yaml, the fixed ask set for the drafting benchmark, agrees with what
Reefine infers from the words alone (kind, command name) and with the ask checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from recipes.quality import asked_command_name
from recipes.reefine.draft import kind_named_by
from reef_cli.core.asks import AskRefused, check_ask

ASKS: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).resolve().parents[2] / "bench" / "draft_asks.yaml").read_text()
)["asks"]


def test_the_set_is_twenty_asks_covering_every_group() -> None:
    assert len(ASKS) == 20 and len({a["id"] for a in ASKS}) == 20
    groups = {a["group"] for a in ASKS}
    assert groups == {"rule", "skill", "command", "extension", "ambiguous", "hostile"}
    assert any(a.get("name") == "changelog" for a in ASKS)


@pytest.mark.parametrize("item", ASKS, ids=[a["id"] for a in ASKS])
def test_each_ask_is_inferred_as_labelled(item: dict[str, Any]) -> None:
    if item["expect"] == "refused":
        with pytest.raises(AskRefused):
            check_ask(item["ask"])
        return
    check_ask(item["ask"])
    if item["group"] in ("rule", "skill", "command", "extension", "ambiguous"):
        assert kind_named_by(item["ask"]) == item["kind"]
    assert asked_command_name(item["ask"]) == item.get("name")

"""Weight recipes: which records train the weights, with what advantage or loss (docs/reefd.md).

``recipe_named("sao", batch_size=8, max_staleness=2)`` builds one by name; the modules are
imported only then (none of them imports torch).
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from reef_cli.core.errors import ConfigError

# name -> "module:class"
RECIPES: dict[str, str] = {
    "sao": "reefd.weight_recipes.sao:SAO",
    "openclaw_rl": "reefd.weight_recipes.openclaw_rl:OpenClawRL",
    "sft": "reefd.weight_recipes.sft:SFT",
}


def recipe_named(name: str, **options: Any) -> Any:
    """The recipe ``name`` built with ``options`` (None values are left to its defaults).

    openclaw_rl's ``judge`` may be a ``ModelClient`` or a model string (with
    ``judge_api_base``)."""
    target = RECIPES.get(name)
    if target is None:
        raise ConfigError(f"unknown weight recipe {name!r}", f"one of: {', '.join(RECIPES)}")
    module_name, _, class_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    options = {k: v for k, v in options.items() if v is not None}
    if name == "openclaw_rl":
        options = _judge_client(options)
    accepted = set(inspect.signature(cls).parameters)
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise ConfigError(
            f"weight recipe {name!r} has no option {unknown[0]!r}",
            f"its options: {', '.join(sorted(accepted))}",
        )
    if name == "openclaw_rl" and "judge" not in options:
        raise ConfigError("weight recipe 'openclaw_rl' needs a judge", "set recipe.judge")
    return cls(**options)


def _judge_client(options: dict[str, Any]) -> dict[str, Any]:
    from reef_cli.core.llm import ModelClient

    out = dict(options)
    judge = out.get("judge")
    api_base = out.pop("judge_api_base", None)
    if isinstance(judge, str):
        out["judge"] = ModelClient(judge, api_base=api_base)
    return out


__all__ = ["RECIPES", "recipe_named"]

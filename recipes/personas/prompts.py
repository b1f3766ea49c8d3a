"""A persona's prompts: train (sent through the proxy) and held-out (evaluation only),
disjoint by construction.

reasoning-gym prompts are drawn with the task sets' seed ranges
(``recipes.tasks.sources.reasoning_gym``): held-out first, from a range of its own, then
train from another, and no question is used twice. ``list`` prompts are shuffled with
the persona's seed and cut: held-out first, then train.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from recipes.personas.spec import Persona
from reef_cli.core.errors import PersonaInvalid


@dataclass(frozen=True)
class Prompt:
    id: str
    text: str
    answer: str | None  # the gold answer (``correct`` checks), when known


@dataclass(frozen=True)
class PromptSplit:
    train: list[Prompt]
    heldout: list[Prompt]


def split(persona: Persona) -> PromptSplit:
    spec = persona.prompts
    if spec.source == "list":
        items = list(spec.items or [])
        order = list(range(len(items)))
        random.Random(spec.seed).shuffle(order)
        chosen = [
            Prompt(f"p{i}", items[i].prompt, items[i].answer)
            for i in order[: spec.heldout + spec.train]
        ]
        return PromptSplit(train=chosen[spec.heldout :], heldout=chosen[: spec.heldout])
    return _reasoning_gym(persona)


def _reasoning_gym(persona: Persona) -> PromptSplit:
    from recipes.tasks.sources.reasoning_gym import seed_base

    try:
        import reasoning_gym
    except ImportError as exc:
        raise PersonaInvalid(
            f"persona {persona.name} draws reasoning-gym prompts, which is not installed",
            "pip install 'reef[tasks]'",
        ) from exc
    spec = persona.prompts
    seen: set[str] = set()
    out: dict[str, list[Prompt]] = {}
    for part, count in (("heldout", spec.heldout), ("train", spec.train)):
        base = seed_base(spec.seed, 0, "test" if part == "heldout" else "train")
        try:
            dataset = reasoning_gym.create_dataset(
                spec.dataset, size=count * 3 + 10, seed=base, **spec.options
            )
            entries = [dataset[i] for i in range(count * 3 + 10)]
        except Exception as exc:  # an unknown dataset or option: name it, one line
            raise PersonaInvalid(
                f"persona {persona.name}: prompts: reasoning-gym {spec.dataset!r} with options "
                f"{spec.options} cannot generate ({type(exc).__name__}: {str(exc)[:120]})",
                "check prompts.dataset and prompts.options",
                field="prompts",
            ) from None
        chosen: list[Prompt] = []
        for i, entry in enumerate(entries):
            question = str(entry["question"])
            if question in seen:
                continue
            seen.add(question)
            chosen.append(Prompt(f"{part}-{i}", question, str(entry.get("answer"))))
            if len(chosen) == count:
                break
        if len(chosen) < count:
            raise PersonaInvalid(
                f"persona {persona.name}: reasoning-gym gave {len(chosen)} distinct {part} "
                f"prompts of {count}",
                "lower prompts.train/heldout or widen prompts.options",
                field=f"prompts.{part}",
            )
        out[part] = chosen
    return PromptSplit(train=out["train"], heldout=out["heldout"])

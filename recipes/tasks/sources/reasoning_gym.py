"""reasoning-gym task sets: procedurally generated questions, scored by each dataset's own
``score_answer`` (the ``reasoning_gym`` scorer keeps the whole entry in the file).

reasoning-gym builds item ``i`` of a dataset from ``seed + i``, so each (dataset, split)
draws from its own seed range, ``STRIDE`` seeds wide (more than any split can hold), and a
question seen once is never used again: train, val and test are disjoint by construction
and checked. Test is drawn first, so the held-out tasks do not depend on the train or val
sizes. Generation is offline: ``create_dataset`` computes, it downloads nothing.
"""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from typing import Any

from pydantic import ValidationError

from recipes.tasks.model import SPLITS, Scorer, Task, TaskSet
from recipes.tasks.sources.catalog import check_sizes, require
from reef_cli.core.errors import TaskSetError

STRIDE = 10_000  # seeds per (dataset, split): more than a task set's 5000 tasks
SEED_SCALE = 1_000_003
DRAW_ORDER = ("test", "val", "train")
_PLAIN_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")


def seed_base(seed: int, dataset: int, split: str) -> int:
    """The first seed of a (dataset, split) range; ranges never overlap for one seed."""
    return seed * SEED_SCALE + (dataset * len(SPLITS) + SPLITS.index(split)) * STRIDE


def available() -> list[str]:
    """The registered dataset names (``composite`` mixes others and needs a config)."""
    from reasoning_gym.factory import DATASETS

    return sorted(n for n in DATASETS if n != "composite")


def make(datasets: list[str], train: int, val: int, test: int, seed: int) -> TaskSet:
    """A task set of ``train``/``val``/``test`` tasks in all, shared evenly by ``datasets``."""
    require("reasoning-gym")
    sizes = check_sizes(train, val, test)
    names = _datasets(datasets)
    seen: set[str] = set()
    drawn: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for split in DRAW_ORDER:
        for d, name in enumerate(names):
            n = sizes[split] // len(names) + (1 if d < sizes[split] % len(names) else 0)
            drawn[split, name] = _draw(name, n, seed_base(seed, d, split), seen)
    tasks = [
        _task(name, split, i, entry)
        for split in SPLITS
        for name in names
        for i, entry in enumerate(drawn[split, name])
    ]
    _assert_disjoint(tasks)
    return TaskSet(
        name=f"reasoning-gym {','.join(names)} (seed {seed})",
        runner="direct",
        source={
            "generator": "reasoning-gym",
            "version": version("reasoning-gym"),
            "datasets": names,
            "seed": seed,
            "sizes": sizes,
            "seeds": f"item i of dataset d, split s: seed*{SEED_SCALE} + (d*3 + s)*{STRIDE} + i",
        },
        tasks=tasks,
    )


def _assert_disjoint(tasks: list[Task]) -> None:
    """No question in two splits: a held-out task seen in training would leak."""
    by_split = [{t.prompt for t in tasks if t.split == s} for s in SPLITS]
    for i, one in enumerate(by_split):
        for other in by_split[i + 1 :]:
            assert not one & other, "a question appears in two splits"


def _datasets(datasets: list[str]) -> list[str]:
    names = list(dict.fromkeys(d.strip() for d in datasets if d.strip()))
    if not names:
        raise TaskSetError(
            "no reasoning-gym dataset given", "pass e.g. --datasets chain_sum,basic_arithmetic"
        )
    known = available()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise TaskSetError(
            f"unknown reasoning-gym dataset {', '.join(unknown)}",
            f"pick from {', '.join(known)}",
        )
    return names


def _draw(name: str, n: int, base: int, seen: set[str]) -> list[dict[str, Any]]:
    """``n`` entries with questions not in ``seen`` (which they join), from ``base`` on."""
    import reasoning_gym

    out: list[dict[str, Any]] = []
    index, size = 0, max(n, 1)
    while len(out) < n:
        if index >= STRIDE:
            raise TaskSetError(
                f"reasoning-gym {name} gave only {len(out)} distinct questions of {n} asked",
                "ask for fewer tasks, or add datasets",
            )
        try:
            dataset = reasoning_gym.create_dataset(name, size=size, seed=base)
            raw = [dataset[i] for i in range(index, size)]
        except Exception as exc:  # a dataset whose defaults do not generate: name it
            raise TaskSetError(
                f"reasoning-gym {name} cannot generate with its default settings: {exc}",
                "pick another dataset",
            ) from exc
        for item in raw:
            entry = _json_safe(name, item)
            if entry["question"] not in seen:
                seen.add(entry["question"])
                out.append(entry)
                if len(out) == n:
                    break
        index, size = size, min(STRIDE, size * 2)
    return out


def _json_safe(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """The entry as plain JSON data (tuples become lists), as the file will hold it."""
    try:
        data = json.loads(json.dumps(entry))
    except (TypeError, ValueError) as exc:
        raise TaskSetError(
            f"reasoning-gym {name} entries are not plain data ({exc})", "pick another dataset"
        ) from exc
    if not isinstance(data.get("question"), str) or "answer" not in data:
        raise TaskSetError(f"reasoning-gym {name} gave an entry with no question or answer")
    return data


def _lenient(answer: object) -> Scorer | None:
    """A looser measure of the same answer: its last number, else the text anywhere."""
    text = str(answer).strip() if answer is not None else ""
    if _PLAIN_NUMBER.fullmatch(text) and len(text) <= 64:
        return Scorer(last_number=text)
    if 0 < len(text) <= 4000:
        return Scorer(contains=text)
    return None


def _task(name: str, split: str, index: int, entry: dict[str, Any]) -> Task:
    try:
        return Task.model_validate(
            {
                "id": f"{name}-{split}-{index:04d}",
                "split": split,
                "prompt": entry["question"],
                "reasoning_gym": {"dataset": name, "entry": entry},
                "lenient": _lenient(entry.get("answer")),
            }
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise TaskSetError(
            f"reasoning-gym {name} made an unusable task ({where}: {err['msg']})",
            "pick another dataset",
        ) from exc

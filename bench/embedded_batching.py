"""The embedded model's aggregate tokens/s, one sequence at a time vs batched, side by side.

    .venv/bin/python bench/embedded_batching.py [--requests 16] [--max-tokens 128]
                                                [--slots 1,2,4,8]

Each slot count runs in its own process (``REEF_EMBEDDED_SLOTS``, one model per
process, as `reef serve` has it): the model is loaded, one call warms it, then the same
``--requests`` chat calls (a shared system prompt: the starter harness, as an evaluation
sends it; a different question each) are sent from as many threads as there are slots.
Reported per slot count: wall seconds, completion tokens, aggregate tokens/s, the ratio
to one slot, and how many answers are identical to the one-slot answers (greedy).
Slot counts run in rounds, interleaved, so machine load hits each alike; the median of
the rounds is reported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _provenance import provenance

QUESTIONS = (
    [
        f"How many legs do {a} spiders and {b} dogs have in total? Show your working."
        for a, b in [(1, 2), (2, 3), (3, 1), (2, 2), (1, 1), (3, 3), (4, 1), (1, 4)]
    ]
    + [
        f"Write a Python function that returns the {word} of a list of numbers, with a docstring."
        for word in ("sum", "mean", "median", "maximum", "minimum", "range", "mode", "product")
    ]
    + [
        f"Explain in two sentences why {thing}."
        for thing in (
            "the sky is blue",
            "bread rises",
            "ice floats",
            "metal feels cold",
            "leaves change colour",
            "the sea is salty",
            "we have leap years",
            "magnets attract iron",
        )
    ]
)


def worker(slots: int, requests: int, max_tokens: int, out: Path) -> None:
    """One process: load the model, warm it, answer every question with ``slots`` threads."""
    from recipes.tasks.runners import render_harness
    from reef_cli.core import embedded_engine
    from reef_cli.core.tree import starter_tree

    system = render_harness(starter_tree().files())
    questions = QUESTIONS[:requests]

    def ask(question: str) -> tuple[str, int]:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
        raw = embedded_engine.chat(messages, max_tokens=max_tokens, temperature=0.0)
        return raw["choices"][0]["message"]["content"], raw["usage"]["completion_tokens"]

    embedded_engine.load()
    ask("Say ok.")
    started = time.perf_counter()
    with ThreadPoolExecutor(slots) as pool:
        answers = list(pool.map(ask, questions))
    wall = time.perf_counter() - started
    out.write_text(
        json.dumps(
            {
                "wall": wall,
                "tokens": sum(n for _, n in answers),
                "answers": [a for a, _ in answers],
                "model": embedded_engine.loaded_name(),
            }
        )
    )


def run_one(slots: int, args: argparse.Namespace, tmp: Path) -> dict:
    out = tmp / f"slots-{slots}.json"
    env = {**os.environ, "REEF_EMBEDDED_SLOTS": str(slots)}  # the person's installed model
    command = [sys.executable, __file__, "--worker", str(slots), "--out", str(out)]
    command += ["--requests", str(args.requests), "--max-tokens", str(args.max_tokens)]
    subprocess.run(command, env=env, check=True)
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--slots", default="1,2,4,8")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.requests > len(QUESTIONS):
        parser.error(f"--requests is at most {len(QUESTIONS)}")
    if args.worker:
        worker(args.worker, args.requests, args.max_tokens, args.out)
        return
    counts = sorted({int(s) for s in args.slots.split(",")} | {1})
    runs: dict[int, list[dict]] = {n: [] for n in counts}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for n in counts:
                runs[n].append(run_one(n, args, Path(tmp)))
                print(f"round {round_ + 1}: {n} slot(s) done", file=sys.stderr)
    load = os.getloadavg()[0]
    print(provenance("embedded_batching.py"))
    print(f"model {runs[1][0]['model']}, {args.requests} requests, max_tokens {args.max_tokens}")
    print(f"load average at the end: {load:.2f} on {os.cpu_count()} CPUs")
    print(f"{'slots':>5} {'wall s':>8} {'tokens':>7} {'tok/s':>7} {'vs 1':>6} {'same as 1':>10}")
    base = statistics.median(r["tokens"] / r["wall"] for r in runs[1])
    reference = runs[1][0]["answers"]
    for n in counts:
        rate = statistics.median(r["tokens"] / r["wall"] for r in runs[n])
        wall = statistics.median(r["wall"] for r in runs[n])
        same = sum(a == b for a, b in zip(runs[n][0]["answers"], reference, strict=True))
        print(
            f"{n:>5} {wall:>8.1f} {runs[n][0]['tokens']:>7} {rate:>7.1f} "
            f"{rate / base:>5.2f}x {same:>4}/{len(reference)}"
        )


if __name__ == "__main__":
    main()

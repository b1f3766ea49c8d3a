"""How long `reef … --help` takes, as a ratio to `python -c pass`, measured side by side.

    .venv/bin/python bench/cli_startup.py [--runs 15]

Each command runs interleaved with the references (so machine load hits all alike); the
median wall time of each is reported. Targets: every `--help` <= 6x `python -c pass`.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

REFERENCES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import typer, rich": [sys.executable, "-c", "import typer, rich.console"],
}


def commands() -> dict[str, list[str]]:
    import typer.main

    from reef_cli.cli.main import app

    root = typer.main.get_command(app)
    ctx = typer.Context(root)
    out = {"reef --help": [sys.executable, "-m", "reef_cli", "--help"]}
    for name in root.list_commands(ctx):
        out[f"reef {name} --help"] = [sys.executable, "-m", "reef_cli", name, "--help"]
    return out


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    jobs = {**REFERENCES, **commands()}
    samples: dict[str, list[float]] = {name: [] for name in jobs}
    for _ in range(args.runs):
        for name, argv in jobs.items():
            samples[name].append(timed(argv))
    base = statistics.median(samples["python -c pass"])
    print(f"{'command':<28} {'median ms':>10} {'x python -c pass':>17}")
    worst = 0.0
    for name, values in samples.items():
        median = statistics.median(values)
        ratio = median / base
        if name.startswith("reef"):
            worst = max(worst, ratio)
        print(f"{name:<28} {median * 1000:>10.1f} {ratio:>16.1f}x")
    print(f"\nworst reef --help: {worst:.1f}x python -c pass (target <= 6x)")


if __name__ == "__main__":
    main()

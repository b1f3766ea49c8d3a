"""A GEPA job end to end, asking the model every time vs reusing answers, side by side.

    .venv/bin/python bench/gepa_speed.py                       # docs/results.md's shape
    .venv/bin/python bench/gepa_speed.py --train 10 --val 10 --test 20 --max-metric-calls 60

One task set (reasoning-gym chain_sum, seed 1, one repeat), then the same job twice in
fresh state dirs, on the embedded model, one sequence at a time: `reef evolve --recipe
gepa` from an empty tree, then `reef eval --releases 1,latest` — as a person runs it and
then looks at the result. The old path passes `--no-cache` to both; the new path reuses
answers (the gate's scores of r1 and the candidate are the eval's). Then the new path's
job once more in a fresh state dir holding the new path's answers: the same search run
again (a second person, a rerun after a crash). Reported: wall
seconds of each, the ratio, and whether the outcome (state, release, GEPA's val scores,
the gate's and the eval's numbers) is the same — greedy decoding promises it is.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _provenance import provenance
from evolution_gain import one_repeat, reef, shared_models


def job(home: Path, tasks: Path, args: argparse.Namespace, cache: bool) -> dict[str, Any]:
    env = {**os.environ, "REEF_HOME": str(home), "REEF_EMBEDDED_SLOTS": "1"}
    env.pop("REEF_MODEL", None)
    extra = [] if cache else ["--no-cache"]
    started = time.monotonic()
    reef(["scenario", "create", "speed"], env)
    empty = home / "empty-tree"
    empty.mkdir()
    (empty / "reef.toml").write_text("format = 1\n")
    reef(["harness", "publish", str(empty), "-s", "speed", "--reason", "empty"], env)
    evolve = ["evolve", "--recipe", "gepa", "-s", "speed", "--tasks", str(tasks)]
    evolve += ["--max-metric-calls", str(args.max_metric_calls), "--yes", "--json", *extra]
    _rc, out, evolve_s = reef(evolve, env)
    outcome = json.loads(out) if out.strip().startswith("{") else {"state": "no json"}
    evidence = outcome.get("evidence") or {}
    evaluated = ["eval", "-s", "speed", "--tasks", str(tasks), "--releases", "1,latest"]
    _rc, out, eval_s = reef([*evaluated, "--json", *extra], env)
    report = json.loads(out) if out.strip().startswith("{") else {}
    return {
        "seconds": round(time.monotonic() - started, 1),
        "evolve_s": round(evolve_s, 1),
        "eval_s": round(eval_s, 1),
        "reused": evidence.get("answers_reused", 0) + report.pop("answers_reused", 0),
        "same_as": {
            "state": outcome.get("state"),
            "release": outcome.get("release"),
            "gepa": {
                k: (evidence.get("gepa") or {}).get(k)
                for k in ("gepa_metric_calls", "seed_val_score", "best_val_score", "lineage")
            },
            "gate": (evidence.get("evaluation") or {}).get("numbers"),
            "eval": [
                (r.get("tag"), r.get("mean"), r.get("invalid")) for r in report.get("releases", [])
            ],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=20)
    parser.add_argument("--val", type=int, default=20)
    parser.add_argument("--test", type=int, default=60)
    parser.add_argument("--max-metric-calls", type=int, default=150)
    parser.add_argument(
        "--skip-old",
        action="store_true",
        help="only the new path and its rerun (the old path's outcome is the new path's)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="reef-gepa-speed-") as tmp:
        root = Path(tmp)
        tasks = root / "tasks.yaml"
        make = ["tasks", "make", "reasoning-gym", "--datasets", "chain_sum", "-o", str(tasks)]
        make += ["--train", str(args.train), "--val", str(args.val), "--test", str(args.test)]
        make += ["--seed", "1"]
        homes = {name: root / name for name in ("old", "new", "again")}
        for home in homes.values():
            home.mkdir()
            shared_models(home)
        rc, _out, _s = reef(make, {**os.environ, "REEF_HOME": str(homes["old"])})
        if rc != 0:
            sys.exit("reef tasks make failed")
        one_repeat(tasks)
        old: dict[str, Any] = {"seconds": 0.0, "evolve_s": 0.0, "eval_s": 0.0, "reused": 0}
        if not args.skip_old:
            old = job(homes["old"], tasks, args, cache=False)
            print(f"old path (--no-cache): {old['seconds']} s", file=sys.stderr)
        new = job(homes["new"], tasks, args, cache=True)
        print(f"new path: {new['seconds']} s", file=sys.stderr)
        cache = homes["again"] / "cache"  # a fresh state dir with the new path's answers
        cache.mkdir(mode=0o700)
        for path in (homes["new"] / "cache").glob("answers.sqlite3*"):
            shutil.copy2(path, cache / path.name)
        again = job(homes["again"], tasks, args, cache=True)
        print(f"new path, second search: {again['seconds']} s", file=sys.stderr)
    print(provenance("gepa_speed.py"))
    print(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"{'path':<34} {'wall s':>7} {'evolve s':>9} {'eval s':>7} {'reused':>7} {'x old':>6}")
    rows = [("new: answers reused", new), ("new, the same search again", again)]
    if not args.skip_old:
        rows.insert(0, ("old: every answer asked", old))
    for name, row in rows:
        ratio = old["seconds"] / row["seconds"] if row["seconds"] and old["seconds"] else 0.0
        print(
            f"{name:<34} {row['seconds']:>7.1f} {row['evolve_s']:>9.1f} {row['eval_s']:>7.1f} "
            f"{row['reused']:>7} {ratio:>5.2f}x"
        )
    if not args.skip_old:
        print(f"same outcome, old vs new: {old['same_as'] == new['same_as']}")
    print(f"same outcome, new vs again: {new['same_as'] == again['same_as']}")
    print(json.dumps({"old": old, "new": new, "again": again}, indent=1))


if __name__ == "__main__":
    main()
